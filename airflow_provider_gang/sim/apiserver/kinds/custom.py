"""Custom resources: validation against the CRD's structural OpenAPI v3 schema.

Like ``apiextensions-apiserver``:

- unknown fields are pruned (``fieldValidation`` Ignore/Warn) or rejected with 400 (Strict), except
  under ``x-kubernetes-preserve-unknown-fields``; ``default`` values are applied;
- the object is validated with ``jsonschema`` (OpenAPI 3.0 is draft-4 flavoured; ``nullable`` and
  ``x-kubernetes-int-or-string`` are translated first), and errors become ``Status`` causes with the
  upstream field paths and messages (``spec.podSets: Required value``);
- the CEL rules in ``x-kubernetes-validations`` are evaluated by ``sim.apiserver.kinds.cel_rules`` on create,
  update and status update (the whole object each time, as upstream), unless a field has the wrong type.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

import jsonschema

from airflow_provider_gang.sim.apiserver import errors, go_format, validation, warning_headers
from airflow_provider_gang.sim.apiserver.errors import Cause
from airflow_provider_gang.sim.apiserver.kinds import cel_rules
from airflow_provider_gang.sim.apiserver.kinds.base import Object, Strategy
from airflow_provider_gang.sim.apiserver.registry import ResourceType

_ROOT_KEYS = frozenset({"apiVersion", "kind", "metadata"})
_VALIDATORS: dict[int, tuple[dict[str, Any], jsonschema.protocols.Validator]] = {}


def to_json_schema(node: Any) -> Any:
    """Translate OpenAPI v3 schema extensions into plain JSON Schema (draft 4)."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: to_json_schema(value) for key, value in node.items() if key != "default"}
    if node.get("x-kubernetes-int-or-string"):
        converted.pop("type", None)
        converted.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    pattern = node.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("^(?i)"):
        # Go RE2 accepts inline flags after "^" (Kueue's AdmissionCheck kind pattern); Python only at the start.
        converted["pattern"] = "(?i)^" + pattern[len("^(?i)") :]
    if node.get("nullable") and "type" in converted:
        converted["type"] = [converted["type"], "null"]
    elif node.get("nullable"):
        converted = {"anyOf": [converted, {"type": "null"}]}
    if "properties" in node:
        converted["properties"] = {k: to_json_schema(v) for k, v in node["properties"].items()}
    return converted


def validator_for(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A compiled validator per CRD schema, shared by every store in the process."""
    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = (schema, jsonschema.Draft4Validator(to_json_schema(schema)))
        _VALIDATORS[id(schema)] = cached
    return cached[1]


def render_path(parts: Iterable[Any]) -> str:
    rendered = ""
    for part in parts:
        rendered += f"[{part}]" if isinstance(part, int) else (f".{part}" if rendered else str(part))
    return rendered


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {str: "string", float: "number", list: "array", dict: "object", type(None): "null"}.get(
        type(value), "object"
    )


def _type_mismatch(value: Any, schema: Any) -> tuple[str, str]:
    """The expected and the found type a wrong-typed value's error names, as kube-openapi's type
    validator (``pkg/validation/validate/type.go``): the JSON type names, or, for a non-string value
    where the schema has a ``format`` the value's own format does not meet, the formats (``int32``
    against ``""`` for a boolean, ``float64`` for a fraction)."""
    schema = schema if isinstance(schema, dict) else {}
    types = schema.get("type") or []
    types = [name for name in ([types] if isinstance(types, str) else types) if name != "null"]  # from nullable
    found = _type_name(value)
    own_format = {"integer": "int64", "number": "float64"}.get(found, "")
    required_format = str(schema.get("format") or "")
    integral_float = found == "number" and float(value).is_integer() and "integer" in types
    widened = found == "integer" and "number" in types
    if (
        required_format
        and not isinstance(value, (str, list))
        and not (found in types or own_format == required_format or integral_float or widened)
    ):
        return required_format, own_format
    return ",".join(types), found


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (dict, list)):
        return f'"{_type_name(value)}"'
    return json.dumps(value)


def prune(value: Any, schema: dict[str, Any], path: list[Any], unknown: list[str], root: bool = False) -> None:
    """Drop (and record) fields the schema does not declare; apply ``default`` values. In place."""
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            if embedded and key in _ROOT_KEYS:
                continue
            declared = properties.get(key) if properties is not None and key in properties else additional
            if value[key] is None and isinstance(declared, dict) and not declared.get("nullable"):
                del value[key]  # a null where null is not allowed counts as absent; a default then applies
                continue
            if properties is not None and key in properties:
                prune(value[key], properties[key], [*path, key], unknown)
            elif isinstance(additional, dict):
                prune(value[key], additional, [*path, key], unknown)
            elif not preserve and additional is not True:
                unknown.append(render_path([*path, key]))
                del value[key]
        for key, sub_schema in (properties or {}).items():
            if key not in value and "default" in sub_schema:
                value[key] = copy.deepcopy(sub_schema["default"])
                prune(value[key], sub_schema, [*path, key], unknown)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            prune(item, schema["items"], [*path, index], unknown)


def schema_causes(obj: Object, schema: dict[str, Any]) -> list[Cause]:
    """Validation errors of ``obj`` against a CRD schema, as ``Status`` causes (each reported once)."""
    unique: list[Cause] = []
    for cause in _schema_causes(obj, schema):
        if cause not in unique:
            unique.append(cause)
    return unique


def _schema_causes(obj: Object, schema: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    body = {k: v for k, v in obj.items() if k != "metadata"}
    for error in sorted(validator_for(schema).iter_errors(body), key=lambda e: list(e.absolute_path)):
        parts = list(error.absolute_path)
        field = render_path(parts)
        if error.validator == "required":
            for missing in list(error.validator_value):  # type: ignore[arg-type]
                if isinstance(error.instance, dict) and missing not in error.instance:
                    causes.append(validation.required(render_path([*parts, missing])))
        elif error.validator == "type":
            expected, actual = _type_mismatch(error.instance, error.schema)
            shown = go_format.quote(actual)
            causes.append(
                errors.field_cause(
                    "FieldValueTypeInvalid",
                    field,
                    f"Invalid value: {shown}: {field} in body must be of type {expected}: {shown}",
                )
            )
        elif error.validator == "enum":
            supported = ", ".join(json.dumps(v) for v in list(error.validator_value))  # type: ignore[arg-type]
            causes.append(
                errors.field_cause(
                    "FieldValueNotSupported",
                    field,
                    f"Unsupported value: {_shown(error.instance)}: supported values: {supported}",
                )
            )
        else:
            causes.append(
                validation.invalid_value(
                    field,
                    error.instance if not isinstance(error.instance, (dict, list)) else _type_name(error.instance),
                    f"{field} in body {_describe(error)}",
                )
            )
    return causes


def _describe(error: Any) -> str:
    value = error.validator_value
    described: str = {
        "pattern": f"should match '{value}'",
        "minItems": f"should have at least {value} items",
        "maxItems": f"must have at most {value} items",
        "minLength": f"should be at least {value} chars long",
        "maxLength": f"may not be longer than {value}",
        "minimum": f"should be greater than or equal to {value}",
        "maximum": f"should be less than or equal to {value}",
        "maxProperties": f"must have at most {value} properties",
        "minProperties": f"should have at least {value} properties",
    }.get(error.validator, error.message)
    return described


class CustomResourceStrategy(Strategy):
    """Admission for custom resources served from a CRD version's schema."""

    tracks_generation = True

    def _prune_and_check(
        self, new: Object, old: Object | None, resource_type: ResourceType, field_validation: str
    ) -> list[Cause]:
        schema = resource_type.schema
        if schema is None:
            return []
        unknown: list[str] = []
        prune(new, schema, [], unknown, root=True)
        if unknown and field_validation == "Strict":
            raise errors.bad_request("strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown))
        if field_validation == "Warn":
            for field in unknown:
                warning_headers.warn(f'unknown field "{field}"')
        causes = schema_causes(new, schema)
        if any(cause["reason"] == "FieldValueTypeInvalid" for cause in causes):
            return [*causes, cel_rules.blocked_cause()]
        return causes + cel_rules.rule_causes(new, old, schema)

    def validate_create(self, new: Object, resource_type: ResourceType, field_validation: str) -> list[Cause]:
        causes = super().validate_create(new, resource_type, field_validation)
        return causes + self._prune_and_check(new, None, resource_type, field_validation)

    def validate_update(
        self, new: Object, old: Object, resource_type: ResourceType, field_validation: str
    ) -> list[Cause]:
        causes = super().validate_update(new, old, resource_type, field_validation)
        return causes + self._prune_and_check(new, old, resource_type, field_validation)

    def validate_status_update(self, new: Object, old: Object, resource_type: ResourceType) -> list[Cause]:
        return self._prune_and_check(new, old, resource_type, "Ignore")

"""``x-kubernetes-validations`` rules of a CRD schema, evaluated where they stand in the object.

As ``apiextensions-apiserver`` (``pkg/apiserver/schema/cel/validation.go``, documented at
https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules):

- a rule is evaluated at its schema location with ``self`` bound to the value there, for every object
  property, map value (``additionalProperties``) and array item present; at the root ``self`` holds
  ``apiVersion``, ``kind``, ``metadata.name``/``generateName``, ``spec`` and ``status``;
- a rule using ``oldSelf`` is a *transition rule*: evaluated only on update and only where the old
  value correlates (same property or map key; ``x-kubernetes-list-type: map`` items by their keys,
  ``set`` items by value; atomic list items never correlate);
- validation ratcheting (``CRDValidationRatcheting``, on by default since Kubernetes 1.30): on update a
  rule without ``oldSelf`` is not re-checked where the value equals its correlated old value;
- a false rule gives ``<path>: Invalid value: <value>: <message>`` (root path ``<nil>``), the value
  at the rule's location printed as Go does (``"text"``, ``4``, ``true``) and left out for objects and
  arrays (``Invalid value: <message>``), the message from ``messageExpression`` if it yields a
  one-line string, else ``message``, else ``failed rule: <rule>``; ``reason`` picks
  Forbidden/Required/Duplicate/Invalid and ``fieldPath`` extends the path; a runtime error gives
  ``<path>: Invalid value: "<schema type>": <error> evaluating rule: <message or rule>``;
- if the schema check found a wrong type, no rule is evaluated and one cause says so
  (``<nil>: Invalid value: null: ...``, ``pkg/registry/customresource/strategy.go``).

Not modelled: the cost budget, ``optionalOldSelf`` (see ``sim.cel_expressions``), the metadata fields beyond name.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_provider_gang.sim.apiserver import cel_expressions as cel
from airflow_provider_gang.sim.apiserver import errors, go_format, validation
from airflow_provider_gang.sim.apiserver.errors import Cause

_ROOT_METADATA = ("name", "generateName")
_FIELD_PATH_PART = re.compile(r"\.([A-Za-z_$][A-Za-z0-9_$-]*)|\[\s*'([^']*)'\s*\]")
_HAS_TRANSITION: dict[int, tuple[dict[str, Any], bool]] = {}
BLOCKED_MESSAGE = (
    "some validation rules were not checked because the object was invalid; correct the existing errors "
    "to complete validation"
)
_MISSING = object()


def rule_causes(new: dict[str, Any], old: dict[str, Any] | None, schema: dict[str, Any]) -> list[Cause]:
    """Causes of every failing rule in ``schema`` for ``new`` (``old`` on update, else None)."""
    return _walk(_root_view(new), _root_view(old) if old is not None else _MISSING, schema, [])


def blocked_cause() -> Cause:
    """The cause upstream adds instead of evaluating rules on an object with wrong-typed fields."""
    return validation.invalid_value("<nil>", None, BLOCKED_MESSAGE)


def _root_view(obj: dict[str, Any]) -> dict[str, Any]:
    view = {key: value for key, value in obj.items() if key != "metadata"}
    metadata = obj.get("metadata") or {}
    view["metadata"] = {key: metadata[key] for key in _ROOT_METADATA if key in metadata}
    return view


def _walk(new: Any, old: Any, schema: dict[str, Any], path: list[Any]) -> list[Cause]:
    unchanged = old is not _MISSING and new == old
    if unchanged and not _has_transition_rules(schema):
        return []
    causes = _node_causes(new, old, schema, path, unchanged)
    if isinstance(new, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, value in new.items():
            sub = properties.get(key) if key in properties else additional if isinstance(additional, dict) else None
            if sub is not None and (path or key != "metadata"):
                causes.extend(_walk(value, old_map.get(key, _MISSING), sub, [*path, key]))
    elif isinstance(new, list) and isinstance(schema.get("items"), dict):
        correlate = _correlator(schema, old)
        for index, item in enumerate(new):
            causes.extend(_walk(item, correlate(item), schema["items"], [*path, index]))
    return causes


def _correlator(schema: dict[str, Any], old: Any) -> Any:
    old_items = old if isinstance(old, list) else []
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map" and old_items:
        keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())

        def identity(item: Any) -> tuple[Any, ...]:
            return tuple(item.get(key) for key in keys) if isinstance(item, dict) else (item,)

        by_key = {identity(item): item for item in old_items}
        return lambda item: by_key.get(identity(item), _MISSING)
    if list_type == "set" and old_items:
        return lambda item: item if item in old_items else _MISSING
    return lambda item: _MISSING


def _node_causes(new: Any, old: Any, schema: dict[str, Any], path: list[Any], unchanged: bool) -> list[Cause]:
    rules = schema.get("x-kubernetes-validations") or []
    if not rules:
        return []
    causes: list[Cause] = []
    field = _render(path)
    type_name = str(schema.get("type") or _json_type(new))
    variables: dict[str, Any] | None = None
    for rule in rules:
        text = str(rule.get("rule", ""))
        try:
            program = cel.compile_expression(text)
        except cel.UnsupportedCel as error:
            causes.append(validation.invalid_value(field, type_name, f"{error}: {text.strip()}"))
            continue
        if program.uses_old_self and old is _MISSING:
            continue
        if unchanged and not program.uses_old_self:
            continue  # ratcheting: an unchanged value keeps passing
        if variables is None:
            variables = {"self": cel.to_cel(new, schema)}
            if old is not _MISSING:
                variables["oldSelf"] = cel.to_cel(old, schema)
        try:
            result = cel.evaluate(program, variables)
        except cel.EvaluationError as error:
            causes.append(validation.invalid_value(field, type_name, f"{error} evaluating rule: {_rule_string(rule)}"))
            continue
        if not cel.is_true(result):
            causes.append(_failure(rule, _extend(path, rule.get("fieldPath")), _reported(new, type_name), variables))
    return causes


def _reported(value: Any, type_name: str) -> Any:
    """The value a false rule's error prints: the value itself, none for objects and arrays."""
    return go_format.OMITTED if type_name in ("object", "array") else value


def _failure(rule: dict[str, Any], path: list[Any], value: Any, variables: dict[str, Any]) -> Cause:
    message = _message_or_default(rule)
    expression = rule.get("messageExpression")
    if expression:
        try:
            produced = cel.as_message(cel.evaluate(cel.compile_expression(str(expression)), variables))
        except (cel.UnsupportedCel, cel.EvaluationError):
            produced = None  # upstream logs it and falls back to message
        message = produced if produced is not None else message
    field = _render(path)
    reason = rule.get("reason")
    if reason == "FieldValueForbidden":
        return validation.forbidden(field, message)
    if reason == "FieldValueRequired":
        return validation.required(field, message)
    if reason == "FieldValueDuplicate":
        shown = go_format.bad_value(value)
        return errors.field_cause(
            "FieldValueDuplicate", field, f"Duplicate value: {shown}" if shown else "Duplicate value"
        )
    return validation.invalid_value(field, value, message)


def _message_or_default(rule: dict[str, Any]) -> str:
    message = str(rule.get("message") or "").strip()
    return message or f"failed rule: {str(rule.get('rule', '')).strip()}"


def _rule_string(rule: dict[str, Any]) -> str:
    return str(rule.get("message") or "").strip() or str(rule.get("rule", "")).strip()


def _extend(path: list[Any], field_path: Any) -> list[Any]:
    if not field_path:
        return path
    return [*path, *(name or quoted for name, quoted in _FIELD_PATH_PART.findall(str(field_path)))]


def _render(path: list[Any]) -> str:
    rendered = ""
    for part in path:
        rendered += f"[{part}]" if isinstance(part, int) else (f".{part}" if rendered else str(part))
    return rendered or "<nil>"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number" if isinstance(value, float) else "integer"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _has_transition_rules(schema: dict[str, Any]) -> bool:
    """Whether any rule at or below ``schema`` uses ``oldSelf`` (cached per schema node)."""
    cached = _HAS_TRANSITION.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    found = False
    for rule in schema.get("x-kubernetes-validations") or []:
        try:
            found = found or cel.compile_expression(str(rule.get("rule", ""))).uses_old_self
        except cel.UnsupportedCel:
            continue
    children = list((schema.get("properties") or {}).values())
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            children.append(schema[key])
    found = found or any(_has_transition_rules(child) for child in children)
    _HAS_TRANSITION[id(schema)] = (schema, found)
    return found

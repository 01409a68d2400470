"""Label and field selectors with the syntax of ``k8s.io/apimachinery/pkg/labels`` and ``fields``.

Label selectors: comma-separated requirements ``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``,
``k in (a,b)``, ``k notin (a,b)``. Field selectors: ``path=v``, ``path==v``, ``path!=v`` on the
fields a real apiserver supports per resource (others give 400 ``field label not supported``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gang_sim.apiserver import errors

_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
# Per-resource selectable fields (pkg/registry/core/*/strategy.go "ToSelectableFields").
_EXTRA_FIELDS: dict[str, frozenset[str]] = {
    "/pods": frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "/events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    "/namespaces": frozenset({"status.phase"}),
    "/nodes": frozenset({"spec.unschedulable"}),
    "/secrets": frozenset({"type"}),
    "batch/jobs": frozenset({"status.successful"}),
}

Matcher = Callable[[Mapping[str, str]], bool]


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    operator: str  # "exists" | "!exists" | "in" | "notin"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!exists":
            return self.key not in labels
        if self.operator == "in":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


_TOKEN = re.compile(r"\s*(!=|==|=|\(|\)|,|!|[^\s!=(),]+)")


def parse_label_selector(selector: str) -> list[LabelRequirement]:
    """Parse a label selector string; raise 400 BadRequest like a real server on bad syntax."""
    tokens = [m.group(1) for m in _TOKEN.finditer(selector or "")]
    requirements: list[LabelRequirement] = []
    position = 0

    def fail() -> errors.ApiError:
        return errors.bad_request(f"unable to parse requirement: invalid label selector {selector!r}")

    while position < len(tokens):
        token = tokens[position]
        if token == "!":
            if position + 1 >= len(tokens):
                raise fail()
            requirements.append(LabelRequirement(tokens[position + 1], "!exists"))
            position += 2
        else:
            key = token
            nxt = tokens[position + 1] if position + 1 < len(tokens) else ","
            if nxt == ",":
                requirements.append(LabelRequirement(key, "exists"))
                position += 1
            elif nxt in ("=", "==", "!="):
                if position + 2 >= len(tokens) or tokens[position + 2] == ",":
                    value, position = "", position + 2
                else:
                    value, position = tokens[position + 2], position + 3
                operator = "notin" if nxt == "!=" else "in"
                requirements.append(LabelRequirement(key, operator, frozenset({value})))
            elif nxt in ("in", "notin"):
                if position + 2 >= len(tokens) or tokens[position + 2] != "(":
                    raise fail()
                position += 3
                values: set[str] = set()
                while position < len(tokens) and tokens[position] != ")":
                    if tokens[position] != ",":
                        values.add(tokens[position])
                    position += 1
                if position >= len(tokens):
                    raise fail()
                position += 1
                requirements.append(LabelRequirement(key, nxt, frozenset(values)))
            else:
                raise fail()
        if position < len(tokens):
            if tokens[position] != ",":
                raise fail()
            position += 1
    return requirements


def label_matcher(selector: str) -> Matcher:
    """A predicate over a label map for a label selector string (empty selects everything)."""
    requirements = parse_label_selector(selector)
    return lambda labels: all(r.matches(labels) for r in requirements)


def matches_label_selector_object(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Match a structured ``LabelSelector`` (``matchLabels`` + ``matchExpressions``), as used by Jobs.

    An empty selector matches everything; a ``None`` selector matches nothing (upstream semantics).
    """
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        operator = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}[expression["operator"]]
        requirement = LabelRequirement(expression["key"], operator, frozenset(expression.get("values") or ()))
        if not requirement.matches(labels):
            return False
    return True


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    value: str
    equal: bool


def parse_field_selector(selector: str, storage_key: str) -> list[FieldRequirement]:
    """Parse a field selector for a resource; 400 on syntax errors or unsupported fields."""
    supported = _COMMON_FIELDS | _EXTRA_FIELDS.get(storage_key, frozenset())
    requirements: list[FieldRequirement] = []
    for part in filter(None, (p.strip() for p in (selector or "").split(","))):
        match = re.fullmatch(r"([^=!]+)(!=|==|=)(.*)", part)
        if not match:
            raise errors.bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        path, operator, value = match.group(1).strip(), match.group(2), match.group(3).strip()
        if path not in supported:
            if storage_key in _EXTRA_FIELDS:  # kinds with their own field-label conversion function
                raise errors.bad_request(f"field label not supported: {path}")
            raise errors.bad_request(
                f'"{path}" is not a known field selector: only "metadata.name", "metadata.namespace"'
            )
        requirements.append(FieldRequirement(path, value, operator != "!="))
    return requirements


def selected_name(requirements: list[FieldRequirement]) -> str | None:
    """The one ``metadata.name`` an equality requirement allows (an index key), if there is one."""
    return next((item.value for item in requirements if item.path == "metadata.name" and item.equal), None)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """A selectable field of an object as the string the selector compares with."""
    current: Any = obj
    for part in path.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def field_matcher(selector: str, storage_key: str) -> Callable[[Mapping[str, Any]], bool]:
    """A predicate over whole objects for a field selector string."""
    requirements = parse_field_selector(selector, storage_key)
    if not requirements:
        return lambda obj: True
    return lambda obj: all((field_value(obj, r.path) == r.value) == r.equal for r in requirements)


def object_matcher(label_selector: str, field_selector: str, storage_key: str) -> Callable[[Mapping[str, Any]], bool]:
    """One predicate for both selectors over whole objects."""
    labels_ok = label_matcher(label_selector)
    fields_ok = field_matcher(field_selector, storage_key)
    return lambda obj: labels_ok((obj.get("metadata") or {}).get("labels") or {}) and fields_ok(obj)

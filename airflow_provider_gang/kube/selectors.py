"""Label and field selectors evaluated on the client, for watches shared by several subscribers.

A shared watch (:mod:`.watch_registry`) lists and watches a wider set of objects than any one
subscriber wants and hands each subscriber the objects its own selectors match, so the client must
match exactly as the API server would. Label selector syntax and meaning follow
``k8s.io/apimachinery/pkg/labels/selector.go``: comma-separated requirements ``k``, ``!k``, ``k=v``,
``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)`` (``!=`` and ``notin`` also match objects without
the label). Field selectors are understood only for ``metadata.name`` and ``metadata.namespace``
(``=``, ``==``); a selector this module cannot read is :class:`Unsupported`, and the caller then gives
that subscriber a watch with exactly its selectors, which the server evaluates.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class Unsupported(ValueError):
    """A selector this module does not evaluate (the server still may)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One label requirement: ``operator`` is ``exists``, ``!exists``, ``in`` or ``notin``; ``values``
    sorted, each once (a tuple: a selector's few values cost a fifth of a ``frozenset``, and every
    waiting gang holds its selectors)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator == "in":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_COMPARE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split(selector: str) -> list[str]:
    """Requirements of ``selector``: split on commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for position, character in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if character == "," and depth == 0:
            parts.append(selector[start:position])
            start = position + 1
    parts.append(selector[start:])
    return [part for part in parts if part.strip()] if selector.strip() else []


def parse_labels(selector: str) -> tuple[Requirement, ...]:
    """The requirements of a label selector; :class:`Unsupported` for syntax this module cannot read.
    Keys and values are interned: every waiting gang's selector repeats the same keys, and its values
    are the label values its cached objects carry (interned by ``kube.shared_values``)."""
    requirements = []
    for part in _split(selector):
        if match := _SET.match(part):
            values = {sys.intern(value.strip()) for value in match.group(3).split(",") if value.strip()}
            requirements.append(Requirement(sys.intern(match.group(1)), match.group(2), tuple(sorted(values))))
        elif match := _COMPARE.match(part):
            operator = "notin" if match.group(2) == "!=" else "in"
            requirements.append(Requirement(sys.intern(match.group(1)), operator, (sys.intern(match.group(3)),)))
        elif match := _EXISTS.match(part):
            requirements.append(Requirement(sys.intern(match.group(2)), "!exists" if match.group(1) else "exists"))
        else:
            raise Unsupported(f"label selector {selector!r}: cannot read {part.strip()!r}")
    return tuple(requirements)


@dataclass(frozen=True, slots=True)
class Selector:
    """What one subscriber wants of a kind: its label requirements and, optionally, one object name."""

    requirements: tuple[Requirement, ...] = ()
    name: str | None = None

    @classmethod
    def parse(cls, label_selector: str = "", field_selector: str = "") -> Selector:
        """From the API's ``labelSelector`` / ``fieldSelector``; :class:`Unsupported` if unreadable."""
        name = None
        for part in _split(field_selector):
            path, _, value = part.replace("==", "=").partition("=")
            if path.strip() == "metadata.name" and "!" not in path:
                if name is not None and name != value.strip():
                    raise Unsupported(f"field selector {field_selector!r}: two names")
                name = value.strip()
            elif path.strip() != "metadata.namespace" or "!" in path:
                raise Unsupported(f"field selector {field_selector!r}: only metadata.name=... is evaluated here")
        return cls(parse_labels(label_selector), name)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether the API server would send ``obj`` to a watch with these selectors (same namespace)."""
        metadata = obj.get("metadata") or {}
        if self.name is not None and metadata.get("name") != self.name:
            return False
        labels = metadata.get("labels") or {}
        return all(requirement.matches(labels) for requirement in self.requirements)

    def equality(self) -> tuple[str, str] | None:
        """One ``key=value`` every matching object carries (to index subscribers by), else ``None``."""
        for requirement in self.requirements:
            if requirement.operator == "in" and len(requirement.values) == 1:
                return requirement.key, requirement.values[0]
        return None

    def scope(self) -> str:
        """A label selector that every object matching this one also matches, and that other
        subscribers of the same kind share: existence of the first label this one requires
        (``airflow-gang.io/gang`` for ``airflow-gang.io/gang=x,role=member``), else ``""``."""
        for requirement in self.requirements:
            if requirement.operator in ("in", "exists"):
                return requirement.key
        return ""

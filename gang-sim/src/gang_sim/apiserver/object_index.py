"""Secondary indexes of one storage key's objects, so a read does not scan every object.

A real API server answers from its watch cache, which indexes by namespace and, for some kinds, by
field (``storage/cacher``, KEP-4933 for pods by node name); listing one object by a
``metadata.name`` field selector costs O(1) there. :class:`ObjectIndex` gives the emulator's store
the same shape of cost:

- by namespace: ``namespace -> {name: object}``;
- by name: ``name -> {namespace: object}`` (``fieldSelector=metadata.name=<name>``);
- by label value: ``(key, value) -> {(namespace, name)}`` (``labelSelector=key=value`` or
  ``key in (v1, v2)``).

:meth:`ObjectIndex.candidates` picks the narrowest index a request allows and returns a superset of
the matching objects, sorted by (namespace, name); the caller still applies the full selector, so
the answer is exactly what a scan would give.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gang_sim.apiserver.selectors import FieldRequirement, LabelRequirement, selected_name

Object = dict[str, Any]
Identity = tuple[str, str]  # (namespace, name)


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    if obj is None:
        return {}
    return (obj.get("metadata") or {}).get("labels") or {}


class ObjectIndex:
    """The indexes of one storage key (see module docstring); kept by ``ObjectTable._commit``."""

    def __init__(self) -> None:
        self.by_namespace: dict[str, dict[str, Object]] = {}
        self.by_name: dict[str, dict[str, Object]] = {}
        self.by_label: dict[tuple[str, str], set[Identity]] = {}

    def put(self, identity: Identity, obj: Object, previous: Object | None) -> None:
        """Index ``obj`` stored at ``identity``, replacing ``previous`` (the object stored before)."""
        namespace, name = identity
        self.by_namespace.setdefault(namespace, {})[name] = obj
        self.by_name.setdefault(name, {})[namespace] = obj
        old_labels, new_labels = _labels(previous), _labels(obj)
        for pair in old_labels.items():
            if new_labels.get(pair[0]) != pair[1]:
                self._unlabel(pair, identity)
        for pair in new_labels.items():
            self.by_label.setdefault(pair, set()).add(identity)

    def remove(self, identity: Identity, previous: Object | None) -> None:
        namespace, name = identity
        for index, outer, inner in ((self.by_namespace, namespace, name), (self.by_name, name, namespace)):
            bucket = index.get(outer)
            if bucket is not None:
                bucket.pop(inner, None)
                if not bucket:
                    del index[outer]
        for pair in _labels(previous).items():
            self._unlabel(pair, identity)

    def _unlabel(self, pair: tuple[str, str], identity: Identity) -> None:
        holders = self.by_label.get(pair)
        if holders is not None:
            holders.discard(identity)
            if not holders:
                del self.by_label[pair]

    def candidates(
        self,
        objects: Mapping[Identity, Object],
        namespace: str | None,
        fields: Sequence[FieldRequirement],
        labels: Sequence[LabelRequirement],
    ) -> list[Object]:
        """Objects that may match (a superset), sorted by (namespace, name); ``namespace`` None = all."""
        for requirement in fields:
            if requirement.path == "metadata.namespace" and requirement.equal and namespace is None:
                namespace = requirement.value
        name = selected_name(list(fields))
        found: Iterable[tuple[Identity, Object]]
        if name is not None:
            by_namespace = self.by_name.get(name, {})
            chosen = by_namespace if namespace is None else {namespace: by_namespace.get(namespace)}
            found = (((ns, name), obj) for ns, obj in chosen.items() if obj is not None)
        elif (identities := self._labelled(labels)) is not None:
            found = (
                (identity, objects[identity])
                for identity in identities
                if (namespace is None or identity[0] == namespace) and identity in objects
            )
        elif namespace is not None:
            found = (((namespace, name), obj) for name, obj in self.by_namespace.get(namespace, {}).items())
        else:
            found = objects.items()
        return [obj for _, obj in sorted(found, key=lambda item: item[0])]

    def _labelled(self, labels: Sequence[LabelRequirement]) -> set[Identity] | None:
        """The smallest identity set an ``in`` (or ``=``) requirement allows; None when none does."""
        best: set[Identity] | None = None
        for requirement in labels:
            if requirement.operator != "in":
                continue
            holders: set[Identity] = set()
            for value in requirement.values:
                holders |= self.by_label.get((requirement.key, value), set())
            if best is None or len(holders) < len(best):
                best = holders
        return best

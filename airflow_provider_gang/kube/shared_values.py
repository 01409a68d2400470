"""Equal parts of cached objects held once: the values of a watch cache, hash-consed.

A triggerer caches thousands of objects that differ in a few fields: every gated member pod has the
same ``status`` (``Pending``, ``PodScheduled=False`` ``SchedulingGated``), the 8 members of a gang
the same ``spec`` and ``annotations``, and every object repeats the same label keys and condition
types. :class:`SharedValues` hands back, for a JSON value (decoded ``dict``/``list``/``str``/number),
an equal value whose equal parts are one instance each, whoever decoded them: strings through
``sys.intern``, containers through a table keyed by their items' identities. It is what client-go
gets from Go's string sharing in decoded objects and what Python's ``json`` does for the keys of
one document only (its decoder's ``memo``, ``Lib/json/decoder.py``).

Contract: what it returns is **read-only** - a shared ``status`` dict belongs to every pod that has
it; the watch caches that use it (:mod:`.shared_watch`) already promise their readers read only.
A container's key holds the identities of its (shared) items: they stay alive as long as the entry
does, so a key never matches other objects. The table is bounded: two generations of at most
``capacity`` containers each; a lookup found in the old generation is carried into the new one, and
when the new one is full the old one is dropped - sharing then starts again for what is still seen,
correctness never depends on it. The root object and the containers under ``skip`` paths (values
unique per object, such as ``metadata`` and ``metadata.labels``) are copied but not kept in the table,
and the strings at ``unique`` paths (``metadata.name``, ``metadata.uid``, ``metadata.resourceVersion``)
are not interned: no other object has them, so an entry in the interpreter's table of interned strings
(about 50 bytes each) would share nothing. The dicts at ``compact`` paths (unique per object too) are
held as :class:`~.frozen_mapping.FrozenMapping` s - a tuple of values beside a key layout all of them
share - and are ``Mapping`` s, not ``dict`` s, to their readers.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from typing import Any

from airflow_provider_gang.kube.frozen_mapping import Layouts

DEFAULT_CAPACITY = 4096
"""Containers per generation: the distinct repeated parts a process keeps seeing (a status, a
spec, a condition list) fit easily; stale ones cost at most two generations of entries."""


class SharedValues:
    """One table of shared JSON values (module docstring)."""

    def __init__(
        self,
        *,
        capacity: int = DEFAULT_CAPACITY,
        skip: frozenset[str] = frozenset(),
        unique: frozenset[str] = frozenset(),
        compact: frozenset[str] = frozenset(),
    ) -> None:
        self.capacity = capacity
        self.skip = skip | compact
        """Dotted paths (``"metadata"``, ``"metadata.labels"``) whose containers are not kept."""
        self.unique = unique
        """Dotted paths (``"metadata.uid"``) whose strings are kept as they are, not interned."""
        self.compact = compact
        """Dotted paths (``"metadata"``) whose dicts are held as frozen mappings (not kept either)."""
        self._layouts = Layouts()
        self._current: dict[Hashable, Any] = {}
        self._previous: dict[Hashable, Any] = {}

    def __len__(self) -> int:
        return len(self._current) + len(self._previous)

    def share(self, value: Any) -> Any:
        """An equal value built of shared parts (the root itself is a new container)."""
        return self._share(value, "", root=True)

    def _share(self, value: Any, path: str, *, root: bool = False) -> Any:
        if type(value) is str:
            return value if path in self.unique else sys.intern(value)
        if type(value) is dict:
            shared_dict = {
                sys.intern(key) if type(key) is str else key: self._share(item, _child(path, key))
                for key, item in value.items()
            }
            if root or path in self.skip:
                return self._layouts.frozen(shared_dict) if not root and path in self.compact else shared_dict
            return self._kept(("d", *_flat(shared_dict.items())), shared_dict)
        if type(value) is list:
            shared_list = [self._share(item, path) for item in value]
            if root or path in self.skip:
                return shared_list
            return self._kept(("l", *(_identity(item) for item in shared_list)), shared_list)
        return value

    def _kept(self, key: tuple[Any, ...], value: Any) -> Any:
        found = self._current.get(key)
        if found is not None:
            return found
        found = self._previous.pop(key, None)
        if found is None:
            found = value
        if len(self._current) >= self.capacity:
            self._previous, self._current = self._current, {}
        self._current[key] = found
        return found


def _child(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _identity(item: Any) -> Hashable:
    """What stands for an item in its container's key: scalars by type and value (``1``, ``1.0``
    and ``True`` differ), shared strings and containers by identity."""
    if type(item) in (dict, list, str):
        return id(item)
    return (type(item).__name__, item)


def _flat(items: Any) -> list[Hashable]:
    flat: list[Hashable] = []
    for key, item in items:
        flat.append(key)
        flat.append(_identity(item))
    return flat

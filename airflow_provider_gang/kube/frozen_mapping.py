"""A read-only mapping held as a tuple of values beside a key layout shared by every mapping with the
same keys in the same order (:class:`FrozenMapping`, built by :class:`Layouts`).

A watch cache holds, for every object, a few mappings no other object shares - its ``metadata`` and
its ``labels`` (a member's rank label makes them its own). As ``dict`` s they cost 184 bytes up to five
keys and 272 up to ten; as a :class:`FrozenMapping` 48 bytes plus a tuple of the values (64 bytes for
three, 96 for seven), the ``{key: position}`` layout being one dict for all of them. This is the
key-sharing of CPython's instance dictionaries (PEP 412) for mappings whose keys are not attribute
names. Lookups (``[]``, ``get``, ``in``) are a dict lookup and a tuple index; iteration follows the
keys' order as given; a mapping equals the ``dict`` of its items (``collections.abc.Mapping``).

Contract: read-only (no item assignment; the values themselves are whatever they were, and the watch
caches that use this promise their readers read only). A copy (``copy.deepcopy``, pickling) is a plain
``dict`` of the same items, so a reader that needs to change one gets one it may change.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

DEFAULT_LAYOUTS = 1024
"""Distinct key layouts kept for sharing; past it the table starts again (each mapping keeps its own)."""


class FrozenMapping(Mapping[str, Any]):
    """A read-only mapping of ``layout`` (``{key: position}``, shared) to ``values`` (module docstring)."""

    __slots__ = ("_layout", "_values")

    def __init__(self, layout: Mapping[str, int], values: tuple[Any, ...]) -> None:
        if len(layout) != len(values):
            raise ValueError(f"{len(layout)} keys but {len(values)} values")
        self._layout = layout
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[self._layout[key]]

    def get(self, key: str, default: Any = None) -> Any:
        position = self._layout.get(key)
        return default if position is None else self._values[position]

    def __contains__(self, key: object) -> bool:
        return key in self._layout

    def __iter__(self) -> Iterator[str]:
        return iter(self._layout)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        return dict, (dict(self.items()),)


class Layouts:
    """The shared key layouts: one ``{key: position}`` dict per distinct tuple of keys, at most
    ``capacity`` of them (then the table starts again; sharing, never correctness, depends on it)."""

    def __init__(self, capacity: int = DEFAULT_LAYOUTS) -> None:
        self.capacity = capacity
        self._layouts: dict[tuple[str, ...], Mapping[str, int]] = {}

    def __len__(self) -> int:
        return len(self._layouts)

    def frozen(self, items: Mapping[str, Any]) -> FrozenMapping:
        """A :class:`FrozenMapping` equal to ``items`` (keys in its order)."""
        keys = tuple(items)
        layout = self._layouts.get(keys)
        if layout is None:
            if len(self._layouts) >= self.capacity:
                self._layouts.clear()
            layout = self._layouts[keys] = {key: position for position, key in enumerate(keys)}
        return FrozenMapping(layout, tuple(items.values()))

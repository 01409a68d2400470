"""Which subscribers of a shared watch a change concerns (:class:`SubscriberIndex`), without looking
at the others: subscribers by the object name or the one ``key=value`` label they select, and the
cached objects' names by label for the keys subscribers select on (client-go's informer indexers,
``tools/cache/index.go``, do the same for the objects)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from airflow_provider_gang.kube.selectors import Selector


class Selecting(Protocol):
    """A subscriber as the index sees it: what it selects."""

    @property
    def selector(self) -> Selector: ...


S = TypeVar("S", bound=Selecting)


@dataclass(eq=False)
class SubscriberIndex(Generic[S]):
    """Subscribers by what they select, and the cache's object names by label, for the keys
    subscribers select on - so a change reaches its subscribers without looking at the others."""

    by_name: dict[str, set[S]] = field(default_factory=dict)
    by_label: dict[tuple[str, str], set[S]] = field(default_factory=dict)
    unindexed: set[S] = field(default_factory=set)
    names_by_label: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    label_keys: set[str] = field(default_factory=set)

    def bucket(self, subscription: S) -> set[S]:
        selector = subscription.selector
        if selector.name is not None:
            return self.by_name.setdefault(selector.name, set())
        equality = selector.equality()
        return self.unindexed if equality is None else self.by_label.setdefault(equality, set())

    def candidates(self, name: str, *objects: Mapping[str, Any] | None) -> set[S]:
        found = set(self.by_name.get(name, ())) | self.unindexed
        for obj in objects:
            for pair in _labels(obj).items():
                found |= self.by_label.get(pair, set())
        return found

    def track(self, name: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        for pair in _labels(old).items():
            if pair[0] in self.label_keys:
                self.names_by_label.get(pair, set()).discard(name)
        for pair in _labels(new).items():
            if pair[0] in self.label_keys:
                self.names_by_label.setdefault(pair, set()).add(name)

    def reindex(self, objects: Mapping[str, Mapping[str, Any]]) -> None:
        self.names_by_label = {}
        for name, obj in objects.items():
            self.track(name, None, obj)


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}

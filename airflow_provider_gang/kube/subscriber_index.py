"""Which subscribers of a shared watch a change concerns (:class:`SubscriberIndex`), without looking
at the others: subscribers by the object name or the one ``key=value`` label they select, and the
cached objects' names by label for the keys subscribers select on (client-go's informer indexers,
``tools/cache/index.go``, do the same for the objects).

Every bucket is an insertion-ordered ``dict`` used as a set (values ``None``): a one-entry dict costs
184 bytes against a set's 216, an eight-entry one (a gang's member names) 272 against 728, and each
waiting gang holds one or two of them for as long as it waits. An emptied bucket is dropped.
"""

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

    by_name: dict[str, dict[S, None]] = field(default_factory=dict)
    by_label: dict[tuple[str, str], dict[S, None]] = field(default_factory=dict)
    unindexed: dict[S, None] = field(default_factory=dict)
    names_by_label: dict[tuple[str, str], dict[str, None]] = field(default_factory=dict)
    label_keys: set[str] = field(default_factory=set)

    def add(self, subscription: S) -> None:
        selector = subscription.selector
        if selector.name is not None:
            self.by_name.setdefault(selector.name, {})[subscription] = None
        elif (equality := selector.equality()) is not None:
            self.by_label.setdefault(equality, {})[subscription] = None
        else:
            self.unindexed[subscription] = None

    def remove(self, subscription: S) -> None:
        selector = subscription.selector
        if selector.name is not None:
            _discard(self.by_name, selector.name, subscription)
        elif (equality := selector.equality()) is not None:
            _discard(self.by_label, equality, subscription)
        else:
            self.unindexed.pop(subscription, None)

    def candidates(self, name: str, *objects: Mapping[str, Any] | None) -> set[S]:
        found = set(self.by_name.get(name, ()))
        found.update(self.unindexed)
        for obj in objects:
            for pair in _labels(obj).items():
                found.update(self.by_label.get(pair, ()))
        return found

    def names(self, equality: tuple[str, str]) -> dict[str, None]:
        """The cached objects' names that carry label ``equality`` (its key must be in :attr:`label_keys`)."""
        return self.names_by_label.get(equality, {})

    def track(self, name: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        for pair in _labels(old).items():
            if pair[0] in self.label_keys:
                _discard(self.names_by_label, pair, name)
        for pair in _labels(new).items():
            if pair[0] in self.label_keys:
                self.names_by_label.setdefault(pair, {})[name] = None

    def reindex(self, objects: Mapping[str, Mapping[str, Any]]) -> None:
        self.names_by_label = {}
        for name, obj in objects.items():
            self.track(name, None, obj)


def _discard(buckets: dict[Any, dict[Any, None]], key: Any, member: Any) -> None:
    bucket = buckets.get(key)
    if bucket is not None:
        bucket.pop(member, None)
        if not bucket:
            del buckets[key]


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}

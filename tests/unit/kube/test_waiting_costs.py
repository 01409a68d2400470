"""What each waiting gang holds in the shared-watch machinery, and that the cheaper forms keep their
meaning: ``Wakeup.wait`` with a timeout of its own, ``LatestViews.take`` (what ``together`` yields,
without a task), the subscriber index dropping emptied buckets, and the strings of unique paths kept
out of the interpreter's interned-string table."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_gang.kube.selectors import Selector
from airflow_provider_gang.kube.shared_values import SharedValues
from airflow_provider_gang.kube.subscriber_index import SubscriberIndex
from airflow_provider_gang.kube.watch_registry import LatestViews, Wakeup
from airflow_provider_gang.triggers.observation import UNIQUE_STRINGS

pytestmark = pytest.mark.timeout(10)


def fresh(text: str) -> str:
    """An equal string that is a new object (not a literal the compiler interned)."""
    return "".join(list(text))


def is_interned(value: str) -> bool:
    return sys.intern(fresh(value)) is value


def test_strings_of_unique_paths_are_kept_as_they_are_and_every_other_string_is_interned():
    table = SharedValues(skip=frozenset(("metadata", "metadata.labels")), unique=UNIQUE_STRINGS)
    obj = {
        "metadata": {
            "name": fresh("member-unique-7"),
            "uid": fresh("5e1f-unique-uid"),
            "resourceVersion": fresh("918273645"),
            "labels": {"airflow-gang.io/gang": fresh("gang-shared-name")},
        },
        "status": {"phase": fresh("Pending-shared")},
    }
    shared = table.share(obj)
    assert shared == obj
    metadata = shared["metadata"]
    assert [is_interned(metadata[key]) for key in ("name", "uid", "resourceVersion")] == [False, False, False]
    assert is_interned(metadata["labels"]["airflow-gang.io/gang"]) and is_interned(shared["status"]["phase"])


async def test_a_wakeup_waits_until_set_or_its_timeout_and_says_which():
    wakeup = Wakeup()
    assert await wakeup.wait(0.01) is False
    wakeup.set()
    assert await wakeup.wait(0.01) is True and await wakeup.wait() is True  # stays set until cleared
    wakeup.clear()
    waiting = asyncio.ensure_future(wakeup.wait(5.0))
    await asyncio.sleep(0)
    wakeup.set()
    assert await asyncio.wait_for(waiting, 1.0) is True


async def test_a_cancelled_wait_leaves_the_wakeup_usable():
    wakeup = Wakeup()
    waiting = asyncio.ensure_future(wakeup.wait(60.0))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    wakeup.set()  # no waiter left to resolve
    assert await wakeup.wait(0.01) is True


@dataclass(eq=False)
class FakeSubscription:
    """What ``LatestViews`` reads of a subscription: its version, view, resource key and error."""

    key: str
    version: int = 0
    view: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None

    @property
    def resource(self) -> Any:
        return self

    def snapshot(self) -> dict[str, Any]:
        return dict(self.view)


def test_views_are_taken_once_every_kind_listed_and_again_only_after_one_moved_on():
    requests, pods = FakeSubscription("requests"), FakeSubscription("pods")
    wakeup = Wakeup()
    latest = LatestViews([requests, pods], wakeup)  # type: ignore[list-item]
    requests.version, requests.view = 1, {"r": {"a": 1}}
    wakeup.set()
    assert latest.take() is None and not wakeup.is_set()  # pods not listed yet: no view at all
    pods.version = 1
    taken = latest.take()
    assert taken == {"requests": {"r": {"a": 1}}, "pods": {}}
    assert latest.take() is None  # nothing moved on
    pods.version, pods.view = 2, {"p": {"b": 2}}
    taken_again = latest.take()
    assert taken_again == {"requests": {"r": {"a": 1}}, "pods": {"p": {"b": 2}}}
    pods.view["q"] = {}
    assert taken_again["pods"] == {"p": {"b": 2}}  # a copy of the view, not the view itself
    pods.error = RuntimeError("forbidden")
    with pytest.raises(RuntimeError, match="forbidden"):
        latest.take()


@dataclass(eq=False)
class Selecting:
    selector: Selector


def test_the_index_drops_a_bucket_once_its_last_subscriber_or_name_leaves():
    index: SubscriberIndex[Selecting] = SubscriberIndex(label_keys={"gang"})
    by_label = Selecting(Selector.parse("gang=g1,role=member"))
    by_name = Selecting(Selector.parse(field_selector="metadata.name=g1"))
    anything = Selecting(Selector.parse("!other"))
    for subscriber in (by_label, by_name, anything):
        index.add(subscriber)
    member = {"metadata": {"name": "g1-0", "labels": {"gang": "g1", "role": "member"}}}
    index.track("g1-0", None, member)
    assert index.candidates("g1-0", member) == {by_label, anything}
    assert index.candidates("g1", None) == {by_name, anything}
    assert index.names(("gang", "g1")) == {"g1-0": None}
    index.track("g1-0", member, None)
    for subscriber in (by_label, by_name, anything):
        index.remove(subscriber)
    assert (index.by_name, index.by_label, index.unindexed, index.names_by_label) == ({}, {}, {}, {})

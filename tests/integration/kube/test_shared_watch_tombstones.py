"""Deletion tombstones of a shared watch, against the emulator: a subscriber that joins after an
object was deleted tells it from one never created (``Subscription.deleted``), within the bounds
``kube.shared_watch`` states (``TOMBSTONE_SECONDS``, ``TOMBSTONE_LIMIT``); an object created again
under its name is no longer reported deleted."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.kube import shared_watch, watch_registry
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.shared_watch import Subscription
from airflow_provider_gang.kube.watch_registry import SharedWatches
from gang_sim.testing.eventually import eventually_async
from tests.builders import pod
from tests.unit.kube.emulated import client, connection, sim

__all__ = ["client", "connection", "sim"]

GANG = "airflow-gang.io/gang"
FAST = ClientOptions(retry_base_delay=0.01, retry_max_delay=0.05)


async def join(registry: SharedWatches, connection: dict[str, Any], **selectors: str) -> Subscription:
    settings = ConnectionSettings.from_dict(connection)
    return await registry.subscribe(
        connection=watch_registry.connection_key(connection, FAST.to_dict()),
        connect=lambda: FAST.connect(settings),
        resource=PODS,
        namespace="default",
        watch_timeout_seconds=60,
        notify=lambda: None,
        **selectors,
    )


async def seen_then_deleted(client: Any, first: Subscription, *names: str) -> None:
    """Create ``names`` in gang g1, wait until ``first`` holds them, delete them, wait until it does not."""
    for name in names:
        await client.create(PODS, pod(name, labels={GANG: "g1"}))
    await eventually_async(lambda: set(names) <= set(first.view), timeout=10, what="the first subscriber to see them")
    for name in names:
        await client.delete(PODS, name)
    await eventually_async(lambda: not set(names) & set(first.view), timeout=10, what="the deletions to arrive")


async def test_a_late_subscriber_tells_a_deleted_object_from_one_never_seen(sim, client, connection):
    registry = SharedWatches()
    first = await join(registry, connection, label_selector=f"{GANG}=g1")
    # A name selector shares the namespace-wide watch, a label selector the watch of its label key.
    first_by_name = await join(registry, connection, field_selector="metadata.name=kept")
    await eventually_async(lambda: first_by_name.version > 0, timeout=10, what="the namespace-wide LIST")
    late: list[Subscription] = []
    try:
        await seen_then_deleted(client, first, "gone")
        late += [
            await join(registry, connection, label_selector=f"{GANG}=g1"),
            await join(registry, connection, field_selector="metadata.name=gone"),
            await join(registry, connection, field_selector="metadata.name=never"),
            await join(registry, connection, label_selector=f"{GANG}=g2"),
        ]
        by_gang, by_name, never, other_gang = late
        await eventually_async(lambda: "gone" in by_name.deleted(), timeout=10, what="the namespace watch to see it go")
        assert by_gang.watch is first.watch and other_gang.watch is first.watch
        assert by_name.watch is first_by_name.watch and never.watch is first_by_name.watch
        assert "gone" not in by_gang.view and "gone" not in by_name.view
        stone = by_gang.deleted()["gone"]
        assert stone.last["metadata"]["labels"] == {GANG: "g1"}
        assert set(by_name.deleted()) == {"gone"}
        assert never.deleted() == {} and never.view == {}  # never seen: no view, no tombstone
        assert other_gang.deleted() == {}  # its selector did not match the deleted object
        assert set(first.deleted()) == {"gone"}  # the subscriber that saw it go gets the same

        await client.create(PODS, pod("gone", labels={GANG: "g1"}))
        await eventually_async(lambda: "gone" in by_name.view, timeout=10, what="the object created again")
        assert by_name.deleted() == {}  # created again: no longer deleted
    finally:
        await registry.unsubscribe_all([first, first_by_name, *late])


async def test_tombstones_are_bounded_in_number_and_time(sim, client, connection, monkeypatch):
    registry = SharedWatches()
    first = await join(registry, connection, label_selector=f"{GANG}=g1")
    late: list[Subscription] = []
    try:
        monkeypatch.setattr(shared_watch, "TOMBSTONE_LIMIT", 2)
        await seen_then_deleted(client, first, "a", "b", "c")
        late.append(await join(registry, connection, label_selector=GANG))
        assert set(late[0].deleted()) == {"b", "c"}  # the oldest dropped past the limit

        monkeypatch.setattr(shared_watch, "TOMBSTONE_SECONDS", 0.0)
        assert late[0].deleted() == {}  # expired: deleted and never-seen read the same again
        assert first.watch.tombstones == {}
    finally:
        await registry.unsubscribe_all([first, *late])


@pytest.mark.parametrize("selector", [f"{GANG}=g1", "metadata.name=gone"])
async def test_a_deletion_before_the_first_list_leaves_no_tombstone(sim, client, connection, selector):
    """Deleted before the watch ever listed it: the watch cannot know, and says never-seen."""
    await client.create(PODS, pod("gone", labels={GANG: "g1"}))
    await client.delete(PODS, "gone")
    registry = SharedWatches()
    field = selector.startswith("metadata.")
    subscription = await join(registry, connection, **{"field_selector" if field else "label_selector": selector})
    try:
        await eventually_async(lambda: subscription.version > 0, timeout=10, what="the first LIST")
        assert subscription.view == {} and subscription.deleted() == {}
    finally:
        await registry.unsubscribe(subscription)

"""Reflector against the emulator: list then watch, resume after cuts, relist on 410, bookmarks,
reconnect after a silent (half-open) connection."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.watch import Changed, Reflector
from gang_sim.testing.eventually import eventually_async
from tests.builders import pod


async def no_sleep(seconds: float) -> None:
    await asyncio.sleep(0)


async def until(snapshots, predicate, timeout: float = 10.0):
    """Pull snapshots until ``predicate`` holds for one; return it."""

    async def pull():
        async for objects in snapshots:
            if predicate(objects):
                return objects
        raise AssertionError("the reflector stopped")

    return await asyncio.wait_for(pull(), timeout)


async def test_lists_once_then_follows_changes_with_one_watch(sim, client):
    await client.create(PODS, pod("one", labels={"team": "a"}))
    await client.create(PODS, pod("other", labels={"team": "b"}))
    reflector = Reflector(client, PODS, label_selector="team=a", watch_timeout_seconds=60)
    async with contextlib.aclosing(reflector.snapshots()) as snapshots:
        assert set(await anext(snapshots)) == {"one"}
        await client.create(PODS, pod("two", labels={"team": "a"}))
        assert set(await until(snapshots, lambda objects: "two" in objects)) == {"one", "two"}
        await client.delete(PODS, "one")
        remaining = await until(snapshots, lambda objects: "one" not in objects)
        assert set(remaining) == {"two"}
    assert (reflector.stats.lists, reflector.stats.watches, reflector.stats.relists) == (1, 1, 0)
    assert sim.metrics()["requests"]["list"] == {"pods": 1} and sim.metrics()["requests"]["watch"] == {"pods": 1}


async def test_a_deleted_objects_change_carries_the_state_its_delete_event_had(sim, client):
    await client.create(PODS, pod("gone"))
    reflector = Reflector(client, PODS, watch_timeout_seconds=60)
    async with contextlib.aclosing(reflector.changes()) as changes:
        await anext(changes)  # the LIST
        await client.delete(PODS, "gone")  # unbound: removed at once, its last state stamped
        change = await asyncio.wait_for(anext(changes), 10)
    assert isinstance(change, Changed) and change.new is None and change.old is not None
    assert change.final is not None and change.final["metadata"]["deletionTimestamp"]
    assert "deletionTimestamp" not in change.old["metadata"]


async def test_after_a_cut_the_watch_resumes_from_the_last_version_without_relisting(sim, client):
    sim.set_faults("watch-cut:0.2")
    reflector = Reflector(client, PODS, watch_timeout_seconds=60, sleep=no_sleep)
    async with contextlib.aclosing(reflector.snapshots()) as snapshots:
        await anext(snapshots)
        for index in range(3):
            if index:  # the watch the last pull left open is cut first: this write waits for a new one
                await sim.until_a_watch_ends()
            await client.create(PODS, pod(f"p{index}"))
            await until(snapshots, lambda objects, index=index: f"p{index}" in objects)
    assert reflector.stats.lists == 1 and reflector.stats.relists == 0
    assert reflector.stats.reconnects >= 2 and reflector.stats.watches >= 3


@pytest.mark.emulator(history_limit=2)
async def test_gone_resource_version_relists(sim, client):
    sim.set_faults("watch-cut:0.2")
    reflector = Reflector(client, PODS, watch_timeout_seconds=60, sleep=no_sleep)
    async with contextlib.aclosing(reflector.snapshots()) as snapshots:
        await anext(snapshots)
        await client.create(PODS, pod("seen"))
        await until(snapshots, lambda objects: "seen" in objects)
        # The consumer pauses; the server ends the watch; meanwhile more changes than the server's
        # history keeps are written, so resuming from the last seen version gets 410 Gone.
        await sim.until_a_watch_ends()
        for index in range(5):
            await client.create(PODS, pod(f"late{index}"))
        objects = await until(snapshots, lambda objects: len(objects) == 6)
    assert set(objects) == {"seen", *(f"late{index}" for index in range(5))}
    assert reflector.stats.relists == 1 and reflector.stats.lists == 2


@pytest.mark.emulator(bookmark_interval_seconds=0.05)
async def test_bookmarks_advance_the_resume_version_without_yielding(sim, client):
    reflector = Reflector(client, PODS, namespace="kube-system", watch_timeout_seconds=60)
    async with contextlib.aclosing(reflector.snapshots()) as snapshots:
        await anext(snapshots)
        listed_version = int(reflector.resource_version)
        await client.create(PODS, pod("elsewhere"))  # in "default": not seen, but moves the version
        pulled = asyncio.ensure_future(anext(snapshots))
        await eventually_async(lambda: reflector.stats.bookmarks >= 3, timeout=10, what="three bookmarks")
        assert not pulled.done()  # bookmarks are not changes
        pulled.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pulled
    assert reflector.stats.bookmarks >= 1
    assert int(reflector.resource_version) > listed_version


async def test_a_silent_connection_is_abandoned_after_the_read_timeout(sim, client):
    reflector = Reflector(client, PODS, watch_timeout_seconds=60, read_timeout=0.2, sleep=no_sleep)
    async with contextlib.aclosing(reflector.snapshots()) as snapshots:
        await anext(snapshots)
        sim.set_faults("latency:0.5")  # every new request now stays silent longer than read_timeout
        pulled = asyncio.ensure_future(anext(snapshots))
        # The open watch had no events either: with no bytes for 0.2 s it is dropped and reopened.
        await eventually_async(
            lambda: reflector.stats.reconnects >= 1, timeout=0.7, what="the silent watch dropped and reopened"
        )
        sim.set_faults("")
        await client.create(PODS, pod("after"))
        objects = await asyncio.wait_for(pulled, 10)
    assert "after" in objects


async def test_a_relist_that_finds_changes_ends_the_backoff_between_410s(sim, client):
    sim.set_faults("watch-expire/pods:1.0")  # every watch answers 410: the reflector follows by LISTs
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    reflector = Reflector(client, PODS, watch_timeout_seconds=60, sleep=record)
    async with contextlib.aclosing(reflector.snapshots()) as snapshots:
        await anext(snapshots)
        for _ in range(6):  # quiet relists: each waits the backoff of one more 410 in a row
            await anext(snapshots)
        quiet = len(waits)
        await client.create(PODS, pod("new"))
        await until(snapshots, lambda objects: "new" in objects)
        changed_at = len(waits)
        await anext(snapshots)  # the next 410 relists at once: no wait was added
    assert quiet == 5  # the first 410 relists without waiting, each further one waits
    assert len(waits) == changed_at

"""Shared watches under the emulator's faults (``/_sim/faults``: cut watch streams, 410 on resume,
failed watch requests) while subscribers with overlapping selectors join and leave at seeded random
points and pods are created, relabelled, changed and deleted: every subscriber ends with exactly the
objects a private watch of its own selectors ends with (names and resourceVersions), never holds an
object its selectors do not match, and never sees an object go back to an older resourceVersion."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import pytest

from airflow_provider_gang.kube import watch_registry
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.selectors import Selector
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.shared_watch import SharedWatch, Subscription
from airflow_provider_gang.kube.watch import Reflector
from airflow_provider_gang.kube.watch_registry import SharedWatches
from gang_sim.testing.eventually import eventually_async
from tests.builders import pod
from tests.unit.kube.emulated import client, connection, sim

__all__ = ["client", "connection", "sim"]

GANG = "airflow-gang.io/gang"
FAST = ClientOptions(retry_base_delay=0.01, retry_max_delay=0.05)
SELECTORS = (
    f"{GANG}=g0",
    f"{GANG}=g1",
    f"{GANG}=g0,role=member",
    f"{GANG}=g1,role!=launcher",
    f"{GANG} in (g1,g2)",
    GANG,
)
POD_NAMES = tuple(f"p{index}" for index in range(10))
FAULTS = "watch-cut:0.15,watch-expire:0.25,watch:0.1:503,seed:{seed}"
EXPIRE_ALL = "watch-cut:0.1,watch-expire:1.0:for:0.4,seed:{seed}"
"""Mid-run, for 0.4 s: every watch is cut within 0.1 s and every resume answered 410."""


def versions(objects: dict[str, Any]) -> dict[str, int]:
    return {name: int(obj["metadata"]["resourceVersion"]) for name, obj in objects.items()}


class Tracked:
    """A subscription plus a private reflector of the same selectors, started together; every state of
    the view is recorded when it is announced (``notify`` runs synchronously with each change)."""

    def __init__(self, selector: str, raises: bool) -> None:
        self.selector, self.raises = selector, raises
        self.subscription: Subscription | None = None
        self.private: Reflector | None = None
        self.private_task: asyncio.Task[None] | None = None
        self.problems: list[str] = []
        self.highest: dict[str, int] = {}

    def notify(self) -> None:
        if self.subscription is None:  # the view a joiner gets inside ``subscribe``: checked at the end
            return
        matcher = Selector.parse(self.selector)
        for name, version in versions(self.subscription.view).items():
            if not matcher.matches(self.subscription.view[name]):
                self.problems.append(f"{name} does not match {self.selector}")
            if version < self.highest.get(name, 0):
                self.problems.append(f"{name} went back from {self.highest[name]} to {version}")
            self.highest[name] = max(version, self.highest.get(name, 0))
        if self.raises:
            raise RuntimeError("a subscriber's bug")


async def run_private(reflector: Reflector) -> None:
    async with contextlib.aclosing(reflector.snapshots()) as snapshots:
        async for _ in snapshots:
            pass


async def mutate(client: Any, rng: random.Random) -> None:
    name = rng.choice(POD_NAMES)
    labels = {GANG: rng.choice(("g0", "g1", "g2")), "role": rng.choice(("member", "launcher"))}
    choice = rng.random()
    try:
        if choice < 0.4:
            await client.create(PODS, pod(name, labels=labels))
        elif choice < 0.65:
            await client.patch(PODS, name, {"metadata": {"labels": labels}})
        elif choice < 0.85:
            await client.patch(PODS, name, {"metadata": {"annotations": {"step": str(rng.random())}}})
        else:
            await client.delete(PODS, name)
    except Exception as error:  # absent or present already: the schedule is random
        if type(error).__name__ not in ("NotFound", "AlreadyExists"):
            raise


@pytest.mark.parametrize("seed", range(3))
async def test_random_joins_and_leaves_under_cuts_and_410s_end_as_private_watches_do(sim, client, connection, seed):
    rng = random.Random(seed)
    settings = ConnectionSettings.from_dict(connection)
    key = watch_registry.connection_key(connection, FAST.to_dict())
    registry = SharedWatches()
    live: list[Tracked] = []
    watches: set[SharedWatch] = set()
    sim.set_faults(FAULTS.format(seed=seed))

    async def join() -> None:
        tracked = Tracked(rng.choice(SELECTORS), raises=rng.random() < 0.2)
        tracked.subscription = await registry.subscribe(
            connection=key,
            connect=lambda: FAST.connect(settings),
            resource=PODS,
            namespace="default",
            label_selector=tracked.selector,
            watch_timeout_seconds=60,
            notify=tracked.notify,
        )
        watches.add(tracked.subscription.watch)
        tracked.private = Reflector(
            client,
            PODS,
            "default",  # a client of its own: a private watch
            label_selector=tracked.selector,
            watch_timeout_seconds=60,
        )
        tracked.private_task = asyncio.create_task(run_private(tracked.private))
        live.append(tracked)

    async def leave(tracked: Tracked) -> None:
        assert tracked.subscription is not None and tracked.private_task is not None
        tracked.private_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tracked.private_task
        await registry.unsubscribe(tracked.subscription)

    try:
        for step in range(70):
            if step in (35, 45):
                sim.set_faults((EXPIRE_ALL if step == 35 else FAULTS).format(seed=seed))
            choice = rng.random()
            if choice < 0.15 or not live:
                await join()
            elif choice < 0.22:
                await leave(live.pop(rng.randrange(len(live))))
            else:
                await mutate(client, rng)
            await asyncio.sleep(rng.uniform(0.0, 0.03))
        sim.set_faults("")
        expected: dict[Any, Any] = {}

        async def settled() -> bool:
            expected.clear()
            expected.update(
                {
                    tracked.selector: versions(await tracked.subscription.read_now())
                    for tracked in live
                    if tracked.subscription is not None
                }
            )
            return all(
                versions(tracked.subscription.view) == expected[tracked.selector]
                and versions(tracked.private.objects) == expected[tracked.selector]
                for tracked in live
                if tracked.subscription and tracked.private
            )

        with contextlib.suppress(AssertionError):  # the assertions below name what did not settle
            await eventually_async(settled, timeout=15.0, what="every view to equal a fresh LIST")
        for tracked in live:
            assert tracked.subscription is not None and tracked.private is not None
            assert versions(tracked.subscription.view) == versions(tracked.private.objects), tracked.selector
            assert versions(tracked.subscription.view) == expected[tracked.selector], tracked.selector
            assert tracked.problems == [], tracked.problems
        assert sum(watch.reflector.stats.relists for watch in watches) >= 1
        assert sum(watch.reflector.stats.reconnects for watch in watches) >= 1
        assert len(registry.watches) <= 3  # one per scope: the gang label's, "in", none
    finally:
        while live:
            await leave(live.pop())
    assert registry.watches == [] and registry.clients == []

"""Shared watches against the emulator: one client and one watch for many subscribers, views exactly
as each subscriber's own selectors, late joiners served from the cache, a slow or failing subscriber
that hurts no one, the last one leaving closing everything."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import yaml

from airflow_provider_gang.kube import errors, watch_registry
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PODS, PROVISIONING_REQUESTS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.shared_watch import Subscription
from airflow_provider_gang.kube.watch_registry import SharedWatches
from gang_sim.apiserver.http.auth import Rule
from tests.builders import pod

GANG = "airflow-gang.io/gang"
FAST = ClientOptions(retry_base_delay=0.01, retry_max_delay=0.05)


def gang_pod(name: str, gang: str, role: str = "member") -> dict[str, Any]:
    return pod(name, labels={GANG: gang, "role": role})


class Subscriber:
    """A subscriber as a trigger is one: its own wake-up event, and ``together`` over its views."""

    def __init__(self, registry: SharedWatches, connection: dict[str, Any]) -> None:
        self.registry, self.connection = registry, connection
        self.wakeup = asyncio.Event()
        self.subscription: Subscription | None = None

    async def join(
        self,
        resource: Any = PODS,
        *,
        label_selector: str = "",
        field_selector: str = "",
        notify: Callable[[], None] | None = None,
        on_retry: Any = None,
    ) -> Subscription:
        settings = ConnectionSettings.from_dict(self.connection)
        self.subscription = await self.registry.subscribe(
            connection=watch_registry.connection_key(self.connection, FAST.to_dict()),
            connect=lambda: FAST.connect(settings),
            resource=resource,
            namespace="default",
            label_selector=label_selector,
            field_selector=field_selector,
            watch_timeout_seconds=60,
            notify=notify or self.wakeup.set,
            on_retry=on_retry,
        )
        return self.subscription

    async def until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> dict[str, Any]:
        assert self.subscription is not None
        async with contextlib.aclosing(watch_registry.together([self.subscription], self.wakeup)) as views:

            async def pull() -> dict[str, Any]:
                async for view in views:
                    if predicate(view[PODS.key] if PODS.key in view else view[PROVISIONING_REQUESTS.key]):
                        return dict(view)
                raise AssertionError("the views ended")

            return await asyncio.wait_for(pull(), timeout)

    async def leave(self) -> None:
        assert self.subscription is not None
        await self.registry.unsubscribe(self.subscription)


@pytest.fixture
async def registry() -> AsyncIterator[SharedWatches]:
    shared = SharedWatches()
    yield shared
    for watch in shared.watches:
        for subscription in list(watch.subscribers):
            await shared.unsubscribe(subscription)


def names(view: dict[str, Any]) -> set[str]:
    return set(next(iter(view.values())))


async def test_gangs_share_one_client_and_one_watch_and_each_sees_only_its_own(sim, client, connection, registry):
    for gang in ("a", "b"):
        for rank in range(2):
            await client.create(PODS, gang_pod(f"{gang}-{rank}", gang))
    sim.reset_metrics()
    first, second, by_name = (Subscriber(registry, connection) for _ in range(3))
    await first.join(label_selector=f"{GANG}=a,role=member")
    await second.join(label_selector=f"{GANG}=b")
    await by_name.join(field_selector="metadata.name=a-1", label_selector=GANG)
    assert names(await first.until(lambda view: len(view) == 2)) == {"a-0", "a-1"}
    assert names(await second.until(lambda view: len(view) == 2)) == {"b-0", "b-1"}
    assert names(await by_name.until(lambda view: len(view) == 1)) == {"a-1"}
    await client.create(PODS, gang_pod("b-2", "b"))
    assert names(await second.until(lambda view: "b-2" in view)) == {"b-0", "b-1", "b-2"}
    assert "b-2" not in first.subscription.view
    assert len(registry.watches) == 1 and len(registry.clients) == 1
    requests = sim.metrics()["requests"]
    assert requests["list"] == {"pods": 1} and requests["watch"] == {"pods": 1}, requests


async def test_overlapping_selectors_and_an_object_leaving_one_of_them(client, connection, registry):
    """A pod relabelled out of a selector leaves that view, as a private watch would see DELETED."""
    await client.create(PODS, gang_pod("a-0", "a"))
    whole, members = Subscriber(registry, connection), Subscriber(registry, connection)
    await whole.join(label_selector=f"{GANG}=a")
    await members.join(label_selector=f"{GANG}=a,role=member")
    await whole.until(lambda view: "a-0" in view)
    await members.until(lambda view: "a-0" in view)
    await client.patch(PODS, "a-0", {"metadata": {"labels": {"role": "launcher"}}})
    assert "a-0" not in (await members.until(lambda view: "a-0" not in view))[PODS.key]
    relabelled = await whole.until(lambda view: view["a-0"]["metadata"]["labels"]["role"] == "launcher")
    assert names(relabelled) == {"a-0"}
    await client.patch(PODS, "a-0", {"metadata": {"labels": {"role": "member"}}})
    assert names(await members.until(lambda view: "a-0" in view)) == {"a-0"}


async def test_a_late_subscriber_gets_the_cached_state_at_once_without_a_request(sim, client, connection, registry):
    await client.create(PODS, gang_pod("a-0", "a"))
    early = Subscriber(registry, connection)
    await early.join(label_selector=f"{GANG}=a")
    await early.until(lambda view: "a-0" in view)
    sim.reset_metrics()
    late = await Subscriber(registry, connection).join(label_selector=f"{GANG}=a")
    assert late.version > 0 and set(late.view) == {"a-0"}
    assert sim.metrics()["total"] == 0


async def test_no_view_is_handed_out_before_the_first_list_answers(sim, client, connection, registry):
    await client.create(PODS, gang_pod("a-0", "a"))
    sim.set_faults("list:1.0:503:count:3")  # the first LIST fails three times, then answers
    subscriber = Subscriber(registry, connection)
    subscription = await subscriber.join(label_selector=f"{GANG}=a")
    first = await subscriber.until(lambda view: True)
    assert names(first) == {"a-0"}
    assert subscription.reflector.stats.lists == 1 and sim.metrics()["codes"].get("503", 0) >= 3


async def test_a_slow_subscriber_stalls_no_one_and_reads_the_latest_state(client, connection, registry):
    slow, fast = Subscriber(registry, connection), Subscriber(registry, connection)
    slow_subscription = await slow.join(label_selector=f"{GANG}=a")  # never reads until the end
    await fast.join(label_selector=f"{GANG}=a")
    for index in range(20):
        await client.create(PODS, gang_pod(f"a-{index}", "a"))
    await fast.until(lambda view: len(view) == 20)
    for index in range(0, 20, 2):
        await client.delete(PODS, f"a-{index}")
    latest = await fast.until(lambda view: len(view) == 10)
    assert slow_subscription.view == latest[PODS.key]  # every change applied, none queued
    assert names(await slow.until(lambda view: True)) == {f"a-{index}" for index in range(1, 20, 2)}


async def test_a_subscriber_whose_callbacks_raise_breaks_no_other(sim, client, connection, registry):
    def broken(*_: Any) -> None:
        raise RuntimeError("subscriber bug")

    faulty, healthy = Subscriber(registry, connection), Subscriber(registry, connection)
    await faulty.join(label_selector=f"{GANG}=a", notify=broken, on_retry=broken)
    retries: list[str] = []
    await healthy.join(label_selector=f"{GANG}=a", on_retry=lambda _, error, __: retries.append(type(error).__name__))
    await healthy.until(lambda view: True)
    sim.set_faults("watch:1.0:503:count:2,watch-cut:0.2")
    await client.create(PODS, gang_pod("a-0", "a"))
    assert names(await healthy.until(lambda view: "a-0" in view)) == {"a-0"}
    assert retries and faulty.subscription.view.keys() == {"a-0"}


async def test_a_subscriber_that_raises_while_reading_leaves_and_the_others_go_on(client, connection, registry):
    crashing, healthy = Subscriber(registry, connection), Subscriber(registry, connection)
    await crashing.join(label_selector=f"{GANG}=a")
    await healthy.join(label_selector=f"{GANG}=a")

    async def crash() -> None:
        try:
            await crashing.until(lambda view: "a-0" in view and 1 / 0)
        finally:
            await crashing.leave()

    task = asyncio.create_task(crash())
    await client.create(PODS, gang_pod("a-0", "a"))
    with pytest.raises(ZeroDivisionError):
        await task
    await client.create(PODS, gang_pod("a-1", "a"))
    assert names(await healthy.until(lambda view: "a-1" in view)) == {"a-0", "a-1"}
    assert len(registry.watches) == 1


async def test_the_last_subscriber_leaving_stops_the_watch_and_closes_the_client(connection, registry):
    first, second = Subscriber(registry, connection), Subscriber(registry, connection)
    await first.join(label_selector=f"{GANG}=a")
    await second.join(PROVISIONING_REQUESTS, field_selector="metadata.name=pr")
    await first.until(lambda view: True)
    (client,) = registry.clients
    watch = first.subscription.watch
    await first.leave()
    await first.leave()  # idempotent
    assert watch.task is not None and watch.task.done() and len(registry.watches) == 1
    assert not client._session.closed
    await second.leave()
    assert registry.watches == [] and registry.clients == [] and client._session.closed
    rejoined = await Subscriber(registry, connection).join(label_selector=f"{GANG}=a")
    assert rejoined.watch is not watch and registry.clients[0] is not client


async def test_a_refused_watch_fails_every_subscriber_and_frees_its_key(sim, registry):
    _, kubeconfig_path = sim.harness.add_user("no-pods", [Rule.parse("get,list,watch:*:configmaps")])
    refused = ConnectionSettings(kubeconfig=yaml.safe_load(kubeconfig_path.read_text())).to_dict()
    first, second = Subscriber(registry, refused), Subscriber(registry, refused)
    await first.join(label_selector=f"{GANG}=a")
    await second.join(label_selector=f"{GANG}=b")
    for subscriber in (first, second):
        with pytest.raises(errors.Forbidden):
            await subscriber.until(lambda view: True)
    assert registry.watches == []
    third = await Subscriber(registry, refused).join(label_selector=f"{GANG}=a")
    assert third.watch is not first.subscription.watch
    await first.leave()
    await second.leave()
    assert len(registry.clients) == 1  # the third's watch still holds it


async def test_clients_are_shared_per_connection_and_watches_per_kind(client, connection, registry):
    settings = ConnectionSettings.from_dict(connection)
    built: list[KubeClient] = []

    async def connect() -> KubeClient:
        built.append(await FAST.connect(settings))
        return built[-1]

    subscriptions = await asyncio.gather(
        *(
            registry.subscribe(
                connection="one",
                connect=connect,
                resource=resource,
                namespace="default",
                label_selector=selector,
                watch_timeout_seconds=60,
                notify=lambda: None,
            )
            for resource, selector in [(PODS, f"{GANG}=a"), (PODS, f"{GANG}=b"), (PROVISIONING_REQUESTS, "")]
        )
    )
    assert len(built) == 1 and len(registry.watches) == 2
    for subscription in subscriptions:
        await registry.unsubscribe(subscription)
    assert built[0]._session.closed


async def test_a_leaver_cancelled_while_leaving_is_cancelled_and_still_closes_everything(connection, registry):
    """A trigger cancelled while it leaves (a triggerer cancelling it during its cleanup) must end
    cancelled, not go on to yield its event - and must not leave its other watches or the client."""
    first = Subscriber(registry, connection)
    pods = await first.join(label_selector=f"{GANG}=a")
    requests = await first.join(PROVISIONING_REQUESTS, field_selector="metadata.name=pr")
    await first.until(lambda view: True)
    (client,) = registry.clients
    leaving = asyncio.create_task(registry.unsubscribe_all([pods, requests]))
    await asyncio.sleep(0)  # inside the first watch's stop()
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert registry.watches == [] and registry.clients == [] and client._session.closed

"""Gang triggers waiting in one process share their watches (``kube.watch_registry``): one LIST and one
WATCH per kind for all of them, each deciding on its own gang only; a trigger rebuilt from its
``serialize()`` joins the watches of the process it lands in; the last one leaving closes them; the
shared cache keeps of each object what the decisions read (``observation.trimmer``)."""

from __future__ import annotations

import asyncio
import importlib

import pytest

from airflow_provider_gang.kube import watch_registry
from airflow_provider_gang.kube.resources import PODS, PROVISIONING_REQUESTS, WORKLOADS
from airflow_provider_gang.reservation import shape
from airflow_provider_gang.reservation.decision import decide
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.observation import CONDITION_TIMES, METADATA_KEPT, trimmer
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from gang_sim.testing.eventually import eventually_async

from .gangs import Gang, condition, first_event, gang_spec, until_watching


async def test_waiting_gangs_share_one_watch_per_kind_and_each_decides_on_its_own(sim, client, connection):
    gangs = [
        await Gang(client, gang_spec(ReservationMode.GATES, name=f"share{index}-t1-0a1b2c3d")).create()
        for index in range(3)
    ]
    sim.reset_metrics()
    triggers = [ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=60)) for gang in gangs]
    waits = [asyncio.create_task(first_event(trigger)) for trigger in triggers]
    for trigger in triggers:
        await until_watching(trigger)
    registry = watch_registry.for_running_loop()
    assert len(registry.watches) == 2 and len(registry.clients) == 1  # ProvisioningRequests, pods
    # A reflector counts its WATCH as it sends it; the server counts it when it arrives.
    await eventually_async(
        lambda: sum(sim.metrics()["requests"].get("watch", {}).values()) >= 2,
        timeout=10,
        what="the server to receive both WATCH requests",
        interval=0.01,
    )

    others = [subscription for index in (0, 2) for subscription in triggers[index].subscriptions]
    versions = [subscription.version for subscription in others]
    await gangs[1].set_request_conditions(condition("Accepted"), condition("Provisioned"))
    event = await asyncio.wait_for(waits[1], 10)
    assert (event["gang_name"], event["phase"]) == (gangs[1].spec.name, "reserved")
    requests = sim.metrics()["requests"]  # the event came through the watches: the server counted them
    assert requests["list"] == {"provisioningrequests.autoscaling.x-k8s.io": 1, "pods": 1}, requests
    assert requests["watch"] == {"provisioningrequests.autoscaling.x-k8s.io": 1, "pods": 1}, requests
    # The shared watch hands a change to the subscribers it concerns as it arrives: the others' views
    # did not move, so they were not woken and still wait on the same watches.
    assert [subscription.version for subscription in others] == versions
    assert not waits[0].done() and not waits[2].done()
    for wait in (waits[0], waits[2]):
        wait.cancel()
    await asyncio.gather(*waits, return_exceptions=True)
    assert registry.watches == [] and registry.clients == []


async def test_a_trigger_rebuilt_from_its_kwargs_joins_the_running_watches(sim, client, connection):
    gang = await Gang(client, gang_spec(ReservationMode.PROVISIONING_REQUEST)).create()
    original = ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=60))
    first = asyncio.create_task(first_event(original))
    await until_watching(original)
    classpath, kwargs = original.serialize()
    module, name = classpath.rsplit(".", 1)
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    sim.reset_metrics()
    second = asyncio.create_task(first_event(rebuilt))
    await until_watching(rebuilt)
    assert rebuilt.reflectors == original.reflectors and "list" not in sim.metrics()["requests"]
    await gang.set_request_conditions(condition("Accepted"), condition("Provisioned"))
    events = await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert [event["reason"] for event in events] == ["reserved", "reserved"]
    assert watch_registry.for_running_loop().watches == []


async def test_the_shared_cache_keeps_what_the_decisions_read_and_drops_the_rest(sim, client, connection):
    gang = await Gang(client, gang_spec(ReservationMode.GATES)).create()
    trigger = ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=60))
    waiting = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    (members,) = [subscription for subscription in trigger.subscriptions if subscription.resource == PODS]
    cached = members.view[gang.names.member(0)]
    assert set(cached["spec"]) == {"schedulingGates", "containers", "terminationGracePeriodSeconds"}
    assert cached["status"] and cached["metadata"]["labels"]
    assert cached["spec"]["containers"] == [{"name": "trainer"}]  # names only (container 0's status is found by name)
    full = (await members.read_now())[gang.names.member(0)]
    assert full["spec"]["containers"] and decide_on(trigger, full) == decide_on(trigger, cached)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)


def decide_on(trigger: ReservationTrigger, pod: dict) -> object:
    observed = trigger.objects.observe(
        {PODS.key: {"p": pod}},
        mode=trigger.mode,
        stage=trigger.stage,
        size=1,
        started_at=0.0,
        scheduling_gate=trigger.arguments.scheduling_gate,
    )
    return decide(observed, now=1.0, policy=trigger.policy())


@pytest.mark.parametrize("resource", [PODS.key, WORKLOADS.key, PROVISIONING_REQUESTS.key])
def test_every_spec_field_a_shape_rule_names_survives_trimming_and_a_wrong_type_stays(resource):
    trim = trimmer(resource)
    assert trimmer(resource) is trim  # one function per kind: the shared watches key their caches by it
    kind = {PODS.key: "Pod", WORKLOADS.key: "Workload", PROVISIONING_REQUESTS.key: "ProvisioningRequest"}[resource]
    named = {path.split(".")[1].removesuffix("[]") for path, _ in shape.RULES_BY_KIND[kind] if path.startswith("spec.")}
    obj = {"metadata": {"name": "x", "managedFields": [{}]}, "spec": {**dict.fromkeys(named, 1), "extra": 1}}
    assert trim(obj) == {"metadata": {"name": "x"}, "spec": dict.fromkeys(named, 1)}
    assert trim({"metadata": {"name": "x"}, "spec": "not an object"})["spec"] == "not an object"


async def test_waiting_gates_triggers_hold_no_full_pod_and_share_what_members_have_in_common(sim, client, connection):
    """Structure, not size: a gated member is cached without what no decision reads (owner
    references, managed fields, condition times), and what the members have in common - the
    gated status of every gang, a gang's spec and annotations - is one object for all of them."""
    gangs = [
        await Gang(client, gang_spec(ReservationMode.GATES, name=f"held{index}-t1-0a1b2c3d", size=4)).create()
        for index in range(2)
    ]
    triggers = [ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=60)) for gang in gangs]
    waits = [asyncio.create_task(first_event(trigger)) for trigger in triggers]
    for trigger in triggers:
        await until_watching(trigger)
    cached = [
        pod
        for trigger in triggers
        for subscription in trigger.subscriptions
        if subscription.resource == PODS
        for pod in subscription.view.values()
    ]
    assert len(cached) == 8
    for pod in cached:
        assert set(pod["metadata"]) <= METADATA_KEPT
        assert not {"ownerReferences", "managedFields"} & set(pod["metadata"])
        assert all(not set(CONDITION_TIMES) & set(item) for item in pod["status"]["conditions"])
    full = (await triggers[0].subscriptions[-1].read_now())[gangs[0].names.member(0)]
    assert full["metadata"]["ownerReferences"] and full["status"]["conditions"][0]["lastTransitionTime"]
    assert len({id(pod["status"]) for pod in cached}) == 1  # every gated member of every gang: one status
    for gang in gangs:
        own = [pod for pod in cached if pod["metadata"]["labels"]["airflow-gang.io/gang"] == gang.spec.name]
        assert (
            len({id(pod["spec"]) for pod in own}) == 1 and len({id(pod["metadata"]["annotations"]) for pod in own}) == 1
        )
    assert len({id(pod["metadata"]["labels"]) for pod in cached}) == 8  # each member's own labels (its rank)
    for wait in waits:
        wait.cancel()
    await asyncio.gather(*waits, return_exceptions=True)

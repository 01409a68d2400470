"""Triggerer death and HA triggerers: a deferred gang trigger cancelled at seeded points and rebuilt
from its serialized form ends its task exactly as an uncut run does; two copies of one trigger at once
change nothing; a triggerer dying during ``on_kill`` leaves a gang the next ``on_kill`` deletes, and an
``on_kill`` whose task instance is not final deletes nothing.

The cluster is ``small`` at 120x with its GPU pool pinned to two nodes, both busy with another team's
pod (running until deleted): a reservation waits - the simulated cluster-autoscaler answers
``CapacityIsNotFound`` and retries every 12 simulated seconds - until the test frees the nodes, once
the cuts planned for the wait are done. So every cut point of a wait is reachable whatever the load,
instead of depending on a clock that starts with the cluster. (``kueue`` mode admits by quota, not by
nodes; its nodes start free.)

A cancelled trigger only gets ``cleanup()``, as from a triggerer that stops (``tests/reliability/
triggerer.py``); Airflow calls ``on_kill`` for user actions only.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import RetryAsIs
from airflow_provider_gang.reservation.naming import GangNames
from demo.cluster import CONN_ID
from gang_sim.apiserver.errors import ApiError
from gang_sim.testing.eventually import eventually, eventually_async
from gang_sim.world.scenario import Scenario, load_scenario
from tests.builders import GPU_TOLERATION, pod
from tests.e2e.driving import FakeTaskInstance, context_for, deferred
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_modes import kueue_queues
from tests.reliability.conftest import FaultCluster, report
from tests.reliability.harness import QUICK_CLIENT, TaskRun, check, rebuild, record_the_killed_try, run_task
from tests.reliability.triggerer import (
    KINDS,
    LIST_LATENCY,
    POLL_SECONDS,
    USER_ACTION,
    DyingTriggerer,
    TaskStateFeed,
    TwinTriggerers,
    background_done,
    die,
    is_watching,
    plan_cuts,
    serve,
    still_running,
    until,
)

GPU = "nvidia.com/gpu"
GPU_NODES = 2
SIZE = 2
RUN_SECONDS = 60
"""Simulated seconds each member runs: 0.5 s at 120x, long enough for run-stage cuts."""
STAGES = ("reservation", "run")
UNCUT = {"reservation": ("success", "reserved"), "run": ("success", "all_succeeded")}
"""``(status, reason)`` of each stage's event in a run nobody cuts."""
HELD: dict[str, str | None] = {"provisioning_request": "reservation", "gates": "reservation", "kueue": None}
"""The stage held open by the busy nodes. Kueue admits by quota, and a run stage held by pending pods
sees no change to cut between (and its pods-ready timeout is 15 s here): its nodes start free."""
SEEDS = {"provisioning_request": range(0, 8), "gates": range(8, 16), "kueue": range(16, 20)}
COVERED = ("provisioning_request", "gates")
"""Modes whose seeds must reach every cut kind in both stages (kueue runs too few seeds)."""
REVIEWS = "authorization.k8s.io/selfsubjectaccessreviews"


# -- the cluster and the task ---------------------------------------------------------------------


def busy_gpus() -> Scenario:
    """``small`` with exactly two GPU nodes (no scale-up: a reservation fits only once they are free)
    and a 12 s autoscaler backoff (a waiting ProvisioningRequest is retried, and rewritten, often)."""
    small = load_scenario("small")
    pools = tuple(
        replace(pool, initial_nodes=GPU_NODES, min_nodes=GPU_NODES, max_nodes=GPU_NODES) if pool.gpus_per_node else pool
        for pool in small.node_pools
    )
    return replace(
        small,
        node_pools=pools,
        autoscaler=replace(small.autoscaler, initial_backoff_seconds=12, max_backoff_seconds=12),
    )


def other_team_pod(name: str) -> dict[str, Any]:
    """A pod holding one GPU node until it is deleted (no run-seconds annotation)."""
    container = {"name": "train", "image": "trainer:sim", "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}
    return pod(name, spec={"containers": [container], "tolerations": [GPU_TOLERATION]}, namespace="default")


def busy_cluster(factory: Any, mode: str, *, busy: bool = True) -> tuple[FaultCluster, Callable[[], None]]:
    """A started cluster (see module docstring) and the call that frees its GPU nodes (idempotent)."""
    busy = busy and HELD[mode] is not None
    cluster = factory(busy_gpus(), time_scale=120)
    if mode == "kueue":
        kueue_queues(cluster.cluster, {"team": 8})
    names = [f"other-team-{index}" for index in range(GPU_NODES)] if busy else []
    for name in names:
        cluster.cluster.create("v1/pods", other_team_pod(name), "default")
    eventually(
        lambda: (
            sum((pod.get("status") or {}).get("phase") == "Running" for pod in cluster.cluster.objects("v1/pods"))
            == len(names)
        ),
        timeout=30.0,
        what="the other team's pods running",
    )
    harness = cluster.cluster

    def delete(name: str) -> None:
        try:
            harness.store.delete("v1/pods", name, "default")
        except ApiError as error:
            if error.code != 404:
                raise

    def release() -> None:
        while names:
            harness.run(functools.partial(delete, names.pop()))

    return cluster, release


def releases(release: Callable[[], None], mode: str) -> Callable[[str], None]:
    """``release`` for a runner: the nodes are freed once the held stage's cuts are done, and at the
    latest when the run stage starts its last copy."""
    return lambda stage: release() if stage in (HELD[mode], "run") else None


def operator(cluster: FaultCluster, mode: str, **options: Any) -> GangTrainingOperator:
    queue: dict[str, Any] = {"kueue_queue": "team"} if mode == "kueue" else {}
    arguments: dict[str, Any] = {
        "pod_template": simulated_pod(RUN_SECONDS),
        "retries": 1,
        "fallbacks": [RetryAsIs()],
        "reservation_timeout": timedelta(seconds=60),
        "startup_timeout": timedelta(seconds=60),
        **queue,
        **options,
    }
    return GangTrainingOperator(
        task_id="train",
        size=SIZE,
        gpus=1,
        reservation=mode,
        distributed="torch",
        deferrable=True,
        client_options=QUICK_CLIENT,
        kubernetes_conn_id=CONN_ID,
        **arguments,
    )


# -- what a run must show --------------------------------------------------------------------------


def repeated_creates(cluster: FaultCluster) -> list[str]:
    """Kinds the task created more often than one try creates them (pods: once per member; every other
    kind once), from the request log - a duplicate even when the first copy was gone by then."""
    counts = Counter(
        entry["resource"]
        for entry in cluster.control.requests()
        if entry["verb"] == "create" and 200 <= (entry.get("code") or 0) < 300 and entry["resource"] != REVIEWS
    )
    return [
        f"{count} creates of {resource}: a try creates {limit}"
        for resource, count in sorted(counts.items())
        if count > (limit := SIZE if resource == "pods" else 1)
    ]


def outcome(event: Mapping[str, Any]) -> tuple[Any, ...]:
    """What two triggers watching the same objects must agree on: the decision, and per member its
    rank, state and exit code (not the timings, nor messages that may quote them)."""
    members = sorted((member["rank"], member["state"], member["exit_code"]) for member in event["members"])
    return (
        event["status"],
        event["stage"],
        event["phase"],
        event["terminal"],
        event["reason"],
        event["admitted_count"],
        tuple(members),
    )


def assert_ends_as_uncut(run: TaskRun, events: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
    """The task succeeded at its first try, each stage ended with the event of an uncut run."""
    assert (run.outcome, run.tries_run) == ("success", 1), (run.error, [record.to_dict() for record in run.records])
    assert [record.outcome for record in run.records] == ["all_succeeded"]
    for stage, expected in UNCUT.items():
        assert [(event["status"], event["reason"]) for event in events[stage]] == [expected], (stage, events[stage])


# -- a trigger cut and rebuilt ---------------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", list(SEEDS))
def test_a_trigger_cut_at_seeded_points_and_rebuilt_ends_the_task_as_an_uncut_run(
    fault_cluster_factory: Any, mode: str
) -> None:
    """Per seed, each stage's trigger is cancelled at 1-3 seeded points (the first one's kind rotates
    with the seed, so every kind comes first in every stage), rebuilt from the deferred trigger's
    serialized form each time. The task succeeds at try 1 with the uncut events, nothing is created
    twice, nothing is left, and no cancelled copy leaves a task running. Every cut planned for a held
    wait is reached; a later cut of a stage that ends on its own may come too late (not counted)."""
    reached: set[tuple[str, str]] = set()
    for seed in SEEDS[mode]:
        rng = random.Random(seed)
        plan = {
            "reservation": plan_cuts(rng, KINDS[seed % len(KINDS)]),
            "run": plan_cuts(rng, KINDS[(seed + 2) % len(KINDS)]),
        }
        cluster, release = busy_cluster(fault_cluster_factory, mode)
        triggerer = DyingTriggerer(cluster.control, plan, releases(release, mode))
        run = run_task(operator(cluster, mode), f"death_{mode}_{seed}", run_trigger=triggerer)
        if triggerer.failures:
            raise triggerer.failures[0]
        verdict = check(run, cluster.ledger)
        verdict.duplicates += repeated_creates(cluster)
        report(f"triggerer dies, trigger rebuilt ({mode})", verdict, faults=len(triggerer.cuts))
        cuts = [f"{stage}: {cut}" for stage, cut in triggerer.cuts]
        assert_ends_as_uncut(run, {stage: log.events for stage, log in triggerer.stages.items()})
        assert cuts, f"seed {seed}: no planned cut was reached ({plan})"
        held = HELD[mode]
        if held is not None:  # a held wait cannot end before its cuts
            assert [cut for stage, cut in triggerer.cuts if stage == held] == plan[held], (seed, plan, cuts)
        reached.update((stage, cut.kind) for stage, cut in triggerer.cuts)
    if mode in COVERED:
        missing = sorted(set(itertools.product(STAGES, KINDS)) - reached)
        assert not missing, f"cut points never reached in {mode}: {missing}"


# -- two triggerers, one trigger -------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(SEEDS))
def test_two_copies_of_each_trigger_at_once_change_nothing(fault_cluster_factory: Any, mode: str) -> None:
    """Both copies of each stage's trigger run at once (both watch a held wait before it ends) and
    end with the same event; the task succeeds at try 1 with nothing duplicated and nothing left."""
    cluster, release = busy_cluster(fault_cluster_factory, mode)
    twins = TwinTriggerers(releases(release, mode))
    run = run_task(operator(cluster, mode), f"twins_{mode}", run_trigger=twins)
    if twins.failures:
        raise twins.failures[0]
    verdict = check(run, cluster.ledger)
    verdict.duplicates += repeated_creates(cluster)
    report(f"HA: two triggerers run each trigger ({mode})", verdict, faults=len(twins.events))
    held = HELD[mode]
    assert held is None or twins.overlapped[held], "the two copies did not both watch the wait"
    for stage, (first, second) in twins.events.items():
        assert outcome(first) == outcome(second), (stage, first, second)
    assert_ends_as_uncut(run, {stage: events[:1] for stage, events in twins.events.items()})


# -- a triggerer dying during on_kill --------------------------------------------------------------

KILL_POINTS = ("reading the owner", "reading the task state", "deleting")
"""Where ``on_kill`` is when it is cut: its owner GET arrived at the API server and is not answered yet;
waiting for the task state; a seeded moment after it read a final state, its owner DELETE not sent
yet or in flight (every request answers :data:`LIST_LATENCY` late during the cut)."""
NOT_FINAL = ("deferred", "scheduled", "queued", "running", "up_for_retry", "none", "unknown")


def gang_objects(cluster: FaultCluster, gang: str) -> set[tuple[str, str, str]]:
    return set(cluster.ledger.objects_of({gang}))


async def user_kill(trigger: Any, feed: TaskStateFeed) -> None:
    """The user marks the task: the watching trigger's task is cancelled with the user-action message
    and awaits its ``on_kill`` (reading ``feed``) to the end."""
    trigger.task_state = feed
    task = asyncio.create_task(serve(trigger))
    assert await until(lambda: is_watching(trigger), task), "the trigger fired before the user action"
    task.cancel(USER_ACTION)
    await asyncio.gather(task, return_exceptions=True)
    assert feed.asked.is_set(), "on_kill never read the task state"


async def on_kill(trigger: Any, state: str) -> None:
    """``on_kill`` of a trigger rebuilt by another triggerer, the task instance being in ``state``."""
    trigger.task_state = TaskStateFeed(state)
    try:
        await trigger.on_kill()
    finally:
        await trigger.cleanup()


async def user_kill_cut(cluster: FaultCluster, trigger: Any, gang: str, point: str, delay: float, fate: str) -> None:
    """The user marks the task failed; at ``point`` of the ``on_kill`` that follows (``delay``: seconds
    after the task state was read, for ``deleting``), the trigger's task is cancelled again - by a
    triggerer that then dies (``fate="dies"``: the detached deletion dies too) or lives on
    (``"lives"``: the deletion finishes in the background)."""
    feed = TaskStateFeed("failed", hold=point == "reading the task state")
    trigger.task_state = feed
    task = asyncio.create_task(serve(trigger))
    assert await until(lambda: is_watching(trigger), task), "the trigger fired before the user action"
    await asyncio.to_thread(cluster.control.set_faults, f"latency:{LIST_LATENCY}")
    await asyncio.to_thread(cluster.control.requests, clear=True)
    try:
        task.cancel(USER_ACTION)
        if point == "reading the owner":
            owner = GangNames(gang).owner

            async def owner_read_arrived() -> bool:
                entries = await asyncio.to_thread(cluster.control.requests)
                return any(
                    entry["verb"] == "get" and entry["resource"] == "configmaps" and entry["name"] == owner
                    for entry in entries
                )

            await eventually_async(
                owner_read_arrived, timeout=30.0, what="on_kill's GET of the owner ConfigMap", interval=POLL_SECONDS
            )
            assert not feed.asked.is_set(), "the owner GET was answered within its latency"
        else:
            assert await until(feed.asked.is_set, task), "on_kill ended before reading the task state"
            if point == "deleting":
                assert await still_running(task, delay)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()
        if fate == "dies":
            await die()
            return
        feed.answer.set()

        async def deleted() -> bool:
            return not gang_objects(cluster, gang)

        await eventually_async(
            deleted, timeout=30.0, what="the deletion of the surviving triggerer", interval=POLL_SECONDS
        )
        await background_done()
    finally:
        await asyncio.to_thread(cluster.control.clear_faults)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("stage", STAGES)
def test_a_triggerer_dying_during_on_kill_leaves_what_the_next_on_kill_deletes(
    fault_cluster_factory: Any, stage: str
) -> None:
    """For every point of ``on_kill`` (owner read, task state read, owner delete) and either fate of
    the triggerer cutting it (dies, lives): an ``on_kill`` of a rebuilt copy with a seeded non-final
    task state deletes nothing; the cut ``on_kill`` deletes nothing before it has read a final state;
    after a death, another non-final ``on_kill`` deletes nothing and a final one deletes the rest; a
    triggerer that lives finishes the deletion alone. Nothing is left, try 1 is recorded killed."""
    rng = random.Random(f"on_kill/{stage}")
    template = simulated_pod(RUN_SECONDS)
    del template["metadata"]["annotations"]["sim.gang.dev/run-seconds"]  # runs until deleted
    cluster, _ = busy_cluster(fault_cluster_factory, "provisioning_request", busy=stage == "reservation")
    for number, (point, fate) in enumerate(itertools.product(KILL_POINTS, ("dies", "lives"))):
        dag_id = f"kill_{stage}_{number}"
        op = operator(cluster, "provisioning_request", pod_template=template, start_by=timedelta(hours=1))
        context = context_for(FakeTaskInstance(dag_id, "run-1"))
        waiting = deferred(op.execute, context)
        if stage == "run":
            waiting = deferred(op.execute_reserved, context, asyncio.run(serve(rebuild(waiting))))
        gang = waiting.gang_name
        intact = gang_objects(cluster, gang)
        waited_for = "v1/pods" if stage == "run" else "autoscaling.x-k8s.io/v1/provisioningrequests"
        assert {"v1/configmaps", waited_for} <= {resource for resource, _, _ in intact}, intact

        asyncio.run(user_kill(rebuild(waiting), TaskStateFeed(rng.choice(NOT_FINAL))))
        assert gang_objects(cluster, gang) == intact, "an on_kill with a non-final task state deleted"
        asyncio.run(user_kill_cut(cluster, rebuild(waiting), gang, point, round(rng.uniform(0.0, 0.15), 3), fate))
        if fate == "dies":
            if point != "deleting":
                assert gang_objects(cluster, gang) == intact, f"on_kill cut while {point} deleted"
                asyncio.run(on_kill(rebuild(waiting), rng.choice(NOT_FINAL)))
                assert gang_objects(cluster, gang) == intact, "an on_kill with a non-final task state deleted"
            asyncio.run(on_kill(rebuild(waiting), "failed"))
        eventually(lambda gang=gang: not gang_objects(cluster, gang), timeout=30.0, what="the gang's objects deleted")
        run = record_the_killed_try(op, dag_id)
        name = "triggerer dies during on_kill" if fate == "dies" else "on_kill cancelled again, triggerer lives"
        report(f"{name} ({stage})", check(run, cluster.ledger), faults=1)

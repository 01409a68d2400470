"""A kill in every phase of a try - reserving, launching, running - in both execution modes: no gang
object is left 30 s later, and the try is recorded as ``killed``.

Blocking mode and a deferrable task's worker stages (launching) are killed the way Airflow's
SIGTERM handler does it: ``operator.on_kill()`` from another thread while the stage runs; the try
then ends with ``AirflowTaskTerminated`` and records itself. A deferred task has no worker: its
trigger's ``on_kill`` deletes the gang (the task instance being marked failed), and the try is
recorded as killed by the next try that reads the history - here one refused by ``start_by``.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation import naming
from demo.cluster import CONN_ID
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import simulated_pod
from tests.reliability.conftest import FaultCluster, report
from tests.reliability.harness import QUICK_CLIENT, SIM_SPEED, TaskRun, check, record_the_killed_try

PHASES = ("reserving", "launching", "running")


def operator(cluster: FaultCluster, *, deferrable: bool) -> GangTrainingOperator:
    template = simulated_pod(3600)
    del template["metadata"]["annotations"]["sim.gang.dev/run-seconds"]  # runs until deleted
    return GangTrainingOperator(
        task_id="train",
        size=4,
        gpus=1,
        pod_template=template,
        distributed="torch",
        deferrable=deferrable,
        retries=1,
        start_by=timedelta(hours=1),
        client_options=QUICK_CLIENT,
        kubernetes_conn_id=CONN_ID,
    )


def when_stored(
    cluster: FaultCluster, resource: str, gang: str, count: int, then: Any = None
) -> tuple[threading.Event, Any]:
    """An event set once ``count`` objects of ``resource`` of ``gang`` were created; ``then`` is
    started in a thread at that moment, before the create's answer is sent."""
    reached, seen = threading.Event(), {"count": 0}

    def changed(event_type: str, changed_resource: str, obj: dict[str, Any]) -> None:
        labels = obj.get("metadata", {}).get("labels") or {}
        if event_type == "ADDED" and changed_resource == resource and labels.get(naming.GANG_LABEL) == gang:
            seen["count"] += 1
            if seen["count"] == count:
                if then is not None:
                    threading.Thread(target=then, daemon=True).start()
                reached.set()

    harness = cluster.cluster
    return reached, harness.run(lambda: harness.store.subscribe(changed))


def in_thread(call: Any) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as error:  # the kill's AirflowTaskTerminated, checked by the caller
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker, outcome


def kill_in_the_worker(cluster: FaultCluster, op: GangTrainingOperator, phase: str, dag_id: str) -> TaskRun:
    """Run the phase in a thread and call ``on_kill`` once it is under way."""
    context = context_for(FakeTaskInstance(dag_id, "run-1"))
    gang = naming.gang_name(dag_id, "train", "run-1", attempt=1)
    resource, count = {
        "reserving": ("autoscaling.x-k8s.io/v1/provisioningrequests", 1),
        "launching": ("v1/pods", 1),
        "running": ("v1/pods", 4),
    }[phase]
    # Launching: killed the moment the first member is stored, while the other creates are in flight.
    reached, unsubscribe = when_stored(
        cluster, resource, gang, count, then=op.on_kill if phase == "launching" else None
    )
    if op.deferrable and phase == "launching":
        event = first_event(deferred(op.execute, context))
        call: Any = lambda: op.execute_reserved(context, event)  # noqa: E731
    else:
        call = lambda: op.execute(context)  # noqa: E731
    worker, outcome = in_thread(call)
    assert reached.wait(60), f"the {phase} phase was never reached"
    if phase == "running":
        wait_running(cluster, gang)
    if phase != "launching":
        op.on_kill()
    worker.join(timeout=60)
    cluster.cluster.run(unsubscribe)
    assert not worker.is_alive()
    error = outcome.get("error")
    assert type(error).__name__ == "AirflowTaskTerminated", outcome
    return TaskRun("killed", 1, TryHistory(context).finished(), None, error, context)


def wait_running(cluster: FaultCluster, gang: str) -> None:
    def all_running() -> bool:
        pods = cluster.cluster.objects("v1/pods", label_selector=f"{naming.GANG_LABEL}={gang}")
        return len(pods) == 4 and all((pod.get("status") or {}).get("phase") == "Running" for pod in pods)

    eventually(all_running, timeout=60, what="the 4 members running")


def kill_the_deferred_trigger(cluster: FaultCluster, op: GangTrainingOperator, phase: str, dag_id: str) -> TaskRun:
    """Mark the deferred task failed: its trigger's ``on_kill`` deletes the gang; the next try
    (refused: the start window has passed) records the killed try."""
    context = context_for(FakeTaskInstance(dag_id, "run-1"))
    trigger = deferred(op.execute, context)
    if phase == "running":
        trigger = deferred(op.execute_reserved, context, first_event(trigger))
        wait_running(cluster, trigger.gang_name)

    async def final() -> str:
        return "failed"

    async def on_kill() -> None:
        try:
            await trigger.on_kill()
        finally:
            await trigger.cleanup()

    trigger.task_state = final
    asyncio.run(on_kill())
    return record_the_killed_try(op, dag_id)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "blocking"])
def test_a_kill_in_every_phase_leaves_nothing_and_is_recorded_as_killed(
    fault_cluster_factory: Any, deferrable: bool
) -> None:
    for phase in PHASES:
        cluster = fault_cluster_factory("small", time_scale=None if phase == "reserving" else SIM_SPEED)
        op = operator(cluster, deferrable=deferrable)
        dag_id = f"kill_{phase}_{'deferrable' if deferrable else 'blocking'}"
        worker_stage = not deferrable or phase == "launching"
        run = (kill_in_the_worker if worker_stage else kill_the_deferred_trigger)(cluster, op, phase, dag_id)
        assert run.records[0].outcome == "killed", [record.to_dict() for record in run.records]
        report(
            f"kill while {phase} ({'deferrable' if deferrable else 'blocking'})",
            check(run, cluster.ledger, grace=30.0),
            faults=1,
        )

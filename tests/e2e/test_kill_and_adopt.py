"""Killing a gang while it waits or runs leaves nothing behind; a retry after a worker crash adopts
the objects the crashed try created instead of duplicating them; a new try withdraws what an
earlier, finished try left."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from airflow_provider_gang.airflow_compat import AirflowTaskTerminated
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangFailedForGood
from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation import manifests, naming
from airflow_provider_gang.reservation.manifests.owner import OWNER_TRY_ANNOTATION
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import TryRecord
from airflow_provider_gang.reservation.spec import GangSpec
from demo.cluster import CONN_ID
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, delete_like_on_kill, first_event
from tests.e2e.gang_dags import gang_objects, simulated_pod


def running_pods(cluster: ClusterHarness, gang: str) -> int:
    pods = cluster.objects("v1/pods", label_selector=f"{naming.GANG_LABEL}={gang}")
    return sum(1 for pod in pods if (pod.get("status") or {}).get("phase") == "Running")


def owner_try(cluster: ClusterHarness, gang: str) -> str | None:
    """The try the gang's owner ConfigMap says owns it."""
    (owner,) = cluster.objects("v1/configmaps", label_selector=f"{naming.GANG_LABEL}={gang}")
    return (owner["metadata"].get("annotations") or {}).get(OWNER_TRY_ANNOTATION)


def on_kill_with_state(trigger: Any, state: str) -> None:
    """The trigger's ``on_kill`` as a triggerer runs it, the task instance being in ``state``."""

    async def task_state() -> str:
        return state

    async def kill() -> None:
        try:
            await trigger.on_kill()
        finally:
            await trigger.cleanup()

    trigger.task_state = task_state
    asyncio.run(kill())


def operator(cluster: ClusterHarness, *, deferrable: bool = True, run_seconds: float | None = None) -> Any:
    template = simulated_pod(run_seconds if run_seconds is not None else 3600)
    if run_seconds is None:
        del template["metadata"]["annotations"]["sim.gang.dev/run-seconds"]  # runs until deleted
    return GangTrainingOperator(
        task_id="train",
        size=4,
        gpus=1,
        pod_template=template,
        deferrable=deferrable,
        distributed="torch",
        kubernetes_conn_id=CONN_ID,
    )


def test_kill_while_reserving_leaves_no_object(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=None)  # manual clock: the request stays pending
    op = operator(cluster)
    trigger = deferred(op.execute, context_for(FakeTaskInstance("kill_reserving", "run-1")))
    assert "autoscaling.x-k8s.io/v1/provisioningrequests" in gang_objects(cluster, trigger.gang_name)
    assert delete_like_on_kill(trigger) > 0
    eventually(lambda: gang_objects(cluster, trigger.gang_name) == {}, timeout=30.0, what="the gang's objects deleted")


def test_kill_while_running_leaves_no_object(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    op = operator(cluster)
    context = context_for(FakeTaskInstance("kill_running", "run-1"))
    reservation = deferred(op.execute, context)
    run_trigger = deferred(op.execute_reserved, context, first_event(reservation))
    eventually(lambda: running_pods(cluster, run_trigger.gang_name) == 4, timeout=30.0, what="the 4 members running")
    assert delete_like_on_kill(run_trigger) > 0
    eventually(
        lambda: gang_objects(cluster, run_trigger.gang_name) == {}, timeout=30.0, what="the gang's objects deleted"
    )


def test_blocking_on_kill_during_run_leaves_no_object(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    op = operator(cluster, deferrable=False)
    ti = FakeTaskInstance("kill_blocking", "run-1")
    outcome: dict[str, BaseException] = {}

    def execute() -> None:
        try:
            op.execute(context_for(ti))
        except BaseException as error:  # the try ends with the gang gone
            outcome["error"] = error

    worker = threading.Thread(target=execute)
    worker.start()
    gang = naming.gang_name("kill_blocking", "train", "run-1", attempt=1)
    eventually(lambda: running_pods(cluster, gang) == 4, timeout=30.0, what="the 4 members running")
    op.on_kill()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), AirflowTaskTerminated)  # a kill ends as a kill
    eventually(lambda: gang_objects(cluster, gang) == {}, timeout=30.0, what="the gang's objects deleted")


def test_retry_after_worker_crash_adopts_the_pods_already_created(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    op = operator(cluster, run_seconds=30)
    first = context_for(FakeTaskInstance("crash_adopt", "run-1", try_number=1))
    reservation = deferred(op.execute, first)
    assert first_event(reservation)["status"] == "success"
    gang = reservation.gang_name
    # The worker of try 1 dies while launching: only ranks 0 and 1 were created.
    spec = GangSpec.from_dict(op.build_spec(gang).to_dict())
    (owner,) = cluster.objects("v1/configmaps", label_selector=f"{naming.GANG_LABEL}={gang}")
    for rank in (0, 1):
        cluster.create("v1/pods", manifests.pods.launch_pod(spec, rank, owner_uid=owner["metadata"]["uid"]))
    crashed_pods = {pod["metadata"]["uid"] for pod in cluster.objects("v1/pods")}

    second = context_for(FakeTaskInstance("crash_adopt", "run-1", try_number=2))
    adopted = deferred(op.execute, second)
    assert adopted.gang_name == gang  # same objects, not a new try's
    assert (reservation.try_number, adopted.try_number) == (1, 2)
    assert owner_try(cluster, gang) == "2"  # try 2 marked the owner it adopted
    run_trigger = deferred(op.execute_reserved, second, first_event(adopted))
    assert run_trigger.try_number == 2
    pods = cluster.objects("v1/pods", label_selector=f"{naming.GANG_LABEL}={gang}")
    assert sorted(pod["metadata"]["name"] for pod in pods) == [naming.GangNames(gang).member(r) for r in range(4)]
    assert crashed_pods <= {pod["metadata"]["uid"] for pod in pods}  # the two survivors were kept
    summary = op.execute_finished(second, first_event(run_trigger))
    assert summary["gang"] == gang
    assert summary["size_run"] == 4
    assert [(item["attempt"], item["outcome"]) for item in summary["tries"]] == [
        (1, "worker_lost"),
        (2, "all_succeeded"),
    ]
    eventually(lambda: gang_objects(cluster, gang) == {}, timeout=30.0, what="the gang's objects deleted")


def test_new_try_withdraws_the_reservation_an_earlier_try_left(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=None)  # manual clock: requests stay pending
    op = operator(cluster)
    op.retries = 1
    first = context_for(FakeTaskInstance("withdraw", "run-1", try_number=1))
    left_behind = deferred(op.execute, first).gang_name
    # Try 1 ended (its deadline passed) but its clean-up never reached the API server.
    TryHistory(first).record(
        TryRecord(
            attempt=1,
            gang=left_behind,
            step="as configured",
            step_index=None,
            mode="provisioning_request",
            size=4,
            outcome="deadline",
            message="",
            retryable=True,
        ),
        drop_current=True,
    )
    second = context_for(FakeTaskInstance("withdraw", "run-1", try_number=2))
    current = deferred(op.execute, second).gang_name
    assert current != left_behind
    assert gang_objects(cluster, left_behind) == {}  # withdrawn before the new request was made
    assert "autoscaling.x-k8s.io/v1/provisioningrequests" in gang_objects(cluster, current)


def test_exhausted_ladder_still_withdraws_what_earlier_tries_left(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=None)
    op = operator(cluster)  # retries=0: no step for a second try
    first = context_for(FakeTaskInstance("withdraw_exhausted", "run-1", try_number=1))
    left_behind = deferred(op.execute, first).gang_name
    TryHistory(first).record(
        TryRecord(
            attempt=1,
            gang=left_behind,
            step="as configured",
            step_index=None,
            mode="provisioning_request",
            size=4,
            outcome="deadline",
            message="",
            retryable=True,
        ),
        drop_current=True,
    )
    with pytest.raises(GangFailedForGood) as caught:
        op.execute(context_for(FakeTaskInstance("withdraw_exhausted", "run-1", try_number=2)))
    assert caught.value.reason is Reason.LADDER_EXHAUSTED
    assert gang_objects(cluster, left_behind) == {}


def test_cleared_try_adopted_by_the_next_one_keeps_the_gang_until_the_owning_try_is_killed(
    cluster_factory: Any,
) -> None:
    """Clearing a deferred task: try 2 adopts try 1's gang; try 1's trigger is cancelled before or
    after that. Its ``on_kill`` keeps the gang while try 2 is on its way or deferred, and also when it
    reads a final state once try 2 owns the gang; try 2's own ``on_kill`` (marked failed) deletes it."""
    cluster = cluster_factory("small", time_scale=None)  # manual clock: the request stays pending
    op = operator(cluster)
    first = deferred(op.execute, context_for(FakeTaskInstance("clear_adopt", "run-1", try_number=1)))
    gang = first.gang_name
    on_kill_with_state(first, "scheduled")  # cancelled before try 2 ran
    assert owner_try(cluster, gang) == "1"
    second = deferred(op.execute, context_for(FakeTaskInstance("clear_adopt", "run-1", try_number=2)))
    assert second.gang_name == gang and owner_try(cluster, gang) == "2"
    on_kill_with_state(first, "deferred")  # cancelled after try 2 deferred (seen under a real triggerer)
    on_kill_with_state(first, "failed")  # cancelled late, try 2 meanwhile marked failed: not try 1's gang
    assert "autoscaling.x-k8s.io/v1/provisioningrequests" in gang_objects(cluster, gang)
    on_kill_with_state(second, "failed")
    eventually(lambda: gang_objects(cluster, gang) == {}, timeout=30.0, what="the gang's objects deleted")

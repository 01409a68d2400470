"""Every try ends once and is recorded, whatever ended it; only an intact gang of a try whose worker
stopped is adopted. Faults come from outside: the emulator's fault injection, deletions through the
API, a kill.

Each test reproduces a defect of the earlier try lifecycle (noted per test): the try that failed at
launch was adopted by the next one, a killed blocking task was recorded as a lost member, adoption
went by name only and before the start window was checked.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_provider_gang.airflow_compat import AirflowTaskTerminated
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangFailedForGood, GangTryFailed
from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation import clock, naming
from airflow_provider_gang.reservation.fallback import OtherZone, ShrinkTo
from airflow_provider_gang.reservation.phases import Reason
from demo.cluster import CONN_ID
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, delete_like_on_kill, first_event
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_kill_and_adopt import gang_objects, running_pods

QUICK_CLIENT = {"retry_attempts": 2, "retry_base_delay": 0.05, "retry_max_delay": 0.1, "request_timeout": 10.0}
"""A client that gives up fast, so "a call failing past its retries" takes milliseconds."""


def gang_operator(cluster: ClusterHarness, **arguments: Any) -> GangTrainingOperator:
    values: dict[str, Any] = {
        "task_id": "train",
        "size": 4,
        "gpus": 1,
        "pod_template": simulated_pod(20),
        "deferrable": True,
        "kubernetes_conn_id": CONN_ID,
        "client_options": QUICK_CLIENT,
        **arguments,
    }
    return GangTrainingOperator(**values)


def outcomes(context: dict[str, Any]) -> list[tuple[int, str]]:
    return [(record.attempt, record.outcome) for record in TryHistory(context).finished()]


def test_a_try_failing_at_launch_is_recorded_and_the_next_try_takes_its_fallback_step(cluster_factory: Any) -> None:
    """Was: try 2 adopted try 1's gang and ran 4 members again instead of shrinking to 2."""
    cluster = cluster_factory("small", time_scale=60)
    shrink = ShrinkTo(2, applies_to=frozenset({Reason.CLUSTER_UNREACHABLE}))
    op = gang_operator(cluster, min_size=2, retries=1, fallbacks=[shrink])
    first = context_for(FakeTaskInstance("launch_fails", "run-1", try_number=1))
    reservation = deferred(op.execute, first)
    event = first_event(reservation)
    cluster.emulator.faults = Faults.parse("create:1.0:503")  # every member create fails
    try:
        with pytest.raises(GangTryFailed) as caught:
            op.execute_reserved(first, event)
    finally:
        cluster.emulator.faults = Faults()
    assert caught.value.reason is Reason.CLUSTER_UNREACHABLE
    assert outcomes(first) == [(1, "cluster_unreachable")]
    eventually(
        lambda: gang_objects(cluster, reservation.gang_name) == {},
        timeout=30.0,
        what="the gang torn down when it ended",
    )

    second = context_for(FakeTaskInstance("launch_fails", "run-1", try_number=2))
    retry = deferred(op.execute, second)
    assert retry.gang_name != reservation.gang_name and retry.size == 2
    run = deferred(op.execute_reserved, second, first_event(retry))
    summary = op.execute_finished(second, first_event(run))
    assert summary["size_run"] == 2 and summary["fallback_step"] == "shrink to 2 members"
    assert [(item["attempt"], item["outcome"]) for item in summary["tries"]] == [
        (1, "cluster_unreachable"),
        (2, "all_succeeded"),
    ]


def test_a_try_failing_in_preparation_is_recorded_and_leaves_nothing(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=None)
    op = gang_operator(cluster, retries=1)
    context = context_for(FakeTaskInstance("prepare_fails", "run-1"))
    cluster.emulator.faults = Faults.parse("create:1.0:503")  # the owner ConfigMap cannot be made
    try:
        with pytest.raises(GangTryFailed) as caught:
            op.execute(context)
    finally:
        cluster.emulator.faults = Faults()
    assert caught.value.reason is Reason.CLUSTER_UNREACHABLE
    assert outcomes(context) == [(1, "cluster_unreachable")]
    assert gang_objects(cluster, naming.gang_name("prepare_fails", "train", "run-1", attempt=1)) == {}


def test_start_by_is_checked_before_a_gang_is_adopted(cluster_factory: Any) -> None:
    """Was: the adopt branch ran before the window check, so a passed start_by started another try."""
    cluster = cluster_factory("small", time_scale=None)  # manual clock: the request stays pending
    op = gang_operator(cluster, retries=1, start_by=timedelta(hours=1))
    first = context_for(FakeTaskInstance("late_adopt", "run-1", try_number=1))
    left = deferred(op.execute, first).gang_name  # ... and try 1's worker dies here
    second = context_for(FakeTaskInstance("late_adopt", "run-1", try_number=2))
    second["data_interval_end"] = datetime.now(timezone.utc) - timedelta(hours=2)
    with pytest.raises(GangFailedForGood) as caught:
        op.execute(second)
    assert caught.value.reason is Reason.START_WINDOW_MISSED
    assert outcomes(second) == [(1, "killed"), (2, "start_window_missed")]
    assert gang_objects(cluster, left) == {}  # withdrawn, not left queued


def test_an_adopted_try_gets_a_deadline_of_its_own(cluster_factory: Any) -> None:
    """Was: try 2 inherited try 1's passed deadline and failed with "reservation_gone: no answer from
    the API server" before its first LIST."""
    cluster = cluster_factory("small", time_scale=None, cluster_time=True)  # one manual clock for all
    op = gang_operator(cluster, retries=1, reservation_timeout=timedelta(seconds=1))
    first = context_for(FakeTaskInstance("own_deadline", "run-1", try_number=1))
    crashed = deferred(op.execute, first)  # try 1's worker dies while its trigger waits
    cluster.advance(2)  # try 1's deadline passes; the request is still pending
    op.reservation_timeout = timedelta(hours=1)
    second = context_for(FakeTaskInstance("own_deadline", "run-1", try_number=2))
    adopted = deferred(op.execute, second)
    assert adopted.gang_name == crashed.gang_name
    assert adopted.deadline == pytest.approx(clock.current().now() + 3600, abs=5)  # its own, from now
    cluster.advance(600)  # the cluster provisions the nodes
    event = first_event(adopted)
    assert (event["status"], event["reason"]) == ("success", "reserved")


def test_a_gang_whose_owner_was_deleted_is_not_adopted(cluster_factory: Any) -> None:
    """Was: adoption by name only; a gang deleted by a kill (or being deleted) was taken over."""
    cluster = cluster_factory("small", time_scale=None)
    op = gang_operator(cluster, retries=1)
    first = context_for(FakeTaskInstance("owner_gone", "run-1", try_number=1))
    killed = deferred(op.execute, first)
    assert delete_like_on_kill(killed) > 0  # its trigger's on_kill (the task was marked failed)
    second = context_for(FakeTaskInstance("owner_gone", "run-1", try_number=2))
    fresh = deferred(op.execute, second)
    assert fresh.gang_name != killed.gang_name
    assert outcomes(second) == [(1, "killed")]
    assert gang_objects(cluster, killed.gang_name) == {}
    assert "autoscaling.x-k8s.io/v1/provisioningrequests" in gang_objects(cluster, fresh.gang_name)


def test_a_replaced_owner_is_not_adopted(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=None)
    op = gang_operator(cluster, retries=1)
    first = context_for(FakeTaskInstance("owner_replaced", "run-1", try_number=1))
    gang = deferred(op.execute, first).gang_name
    (owner,) = cluster.objects("v1/configmaps", label_selector=f"{naming.GANG_LABEL}={gang}")
    name = owner["metadata"]["name"]
    cluster.run(lambda: cluster.store.delete("v1/configmaps", name, "default", propagation_policy="Orphan"))
    replacement = {key: owner[key] for key in ("apiVersion", "kind", "data")}
    replacement["metadata"] = {key: owner["metadata"][key] for key in ("name", "labels", "annotations")}
    cluster.create("v1/configmaps", replacement, "default")
    fresh = deferred(op.execute, context_for(FakeTaskInstance("owner_replaced", "run-1", try_number=2)))
    assert fresh.gang_name != gang
    assert gang_objects(cluster, gang) == {}  # the orphans and the stranger were withdrawn


def test_a_resumed_try_replaces_children_of_an_earlier_owner(cluster_factory: Any) -> None:
    """Objects found by name but owned by another owner uid are never adopted."""
    cluster = cluster_factory("small", time_scale=None)
    op = gang_operator(cluster)
    context = context_for(FakeTaskInstance("stale_children", "run-1"))
    gang = deferred(op.execute, context).gang_name
    selector = f"{naming.GANG_LABEL}={gang}"
    (owner,) = cluster.objects("v1/configmaps", label_selector=selector)
    (request,) = cluster.objects("autoscaling.x-k8s.io/v1/provisioningrequests", label_selector=selector)
    cluster.run(
        lambda: cluster.store.delete("v1/configmaps", owner["metadata"]["name"], "default", propagation_policy="Orphan")
    )
    deferred(op.execute, context)  # the same try again (its worker restarted before deferring)
    (new_owner,) = cluster.objects("v1/configmaps", label_selector=selector)
    (new_request,) = cluster.objects("autoscaling.x-k8s.io/v1/provisioningrequests", label_selector=selector)
    assert new_request["metadata"]["uid"] != request["metadata"]["uid"]
    assert [ref["uid"] for ref in new_request["metadata"]["ownerReferences"]] == [new_owner["metadata"]["uid"]]


def test_a_killed_blocking_task_is_recorded_as_killed_and_is_no_ladder_input(cluster_factory: Any) -> None:
    """Was: recorded as a retryable member_lost (the run trigger saw the deleted pods)."""
    cluster = cluster_factory("small", time_scale=60)
    template = simulated_pod(3600)
    del template["metadata"]["annotations"]["sim.gang.dev/run-seconds"]  # runs until deleted
    op = gang_operator(cluster, deferrable=False, pod_template=template, retries=1, fallbacks=[OtherZone("zone-b")])
    context = context_for(FakeTaskInstance("kill_blocking_record", "run-1"))
    outcome: dict[str, BaseException] = {}

    def execute() -> None:
        try:
            op.execute(context)
        except BaseException as error:
            outcome["error"] = error

    worker = threading.Thread(target=execute)
    worker.start()
    gang = naming.gang_name("kill_blocking_record", "train", "run-1", attempt=1)
    eventually(lambda: running_pods(cluster, gang) == 4, timeout=30.0, what="the 4 members running")
    op.on_kill()  # what Airflow's SIGTERM handler calls
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), AirflowTaskTerminated)
    assert outcomes(context) == [(1, "killed")]
    eventually(lambda: gang_objects(cluster, gang) == {}, timeout=30.0, what="the gang's objects deleted")
    cleared = context_for(FakeTaskInstance("kill_blocking_record", "run-1", try_number=2))
    op.deferrable = True
    again = deferred(op.execute, cleared)
    assert again.gang_name != gang
    stored = TryHistory(cleared).current()
    assert stored is not None and stored.plan.step == "as configured"  # no ladder input


@pytest.mark.parametrize("teardown_fails", [False, True], ids=["torn-down", "teardown-fails"])
def test_a_try_records_its_place_start_by_and_how_long_its_teardown_took(
    cluster_factory: Any, teardown_fails: bool
) -> None:
    """The record keeps what its timeline lane draws; a teardown that fails past its retries is still
    timed, and what it could not delete stays for the next try to withdraw."""
    cluster = cluster_factory("small", time_scale=60)
    op = gang_operator(cluster, start_by=timedelta(hours=2))
    context = context_for(FakeTaskInstance(f"timed_teardown_{int(teardown_fails)}", "run-1"))
    context["data_interval_end"] = datetime.now(timezone.utc)
    reservation = deferred(op.execute, context)
    run = deferred(op.execute_reserved, context, first_event(reservation))
    event = first_event(run)
    before = clock.current().now()
    if teardown_fails:
        cluster.emulator.faults = Faults.parse("delete:1.0:503,deletecollection:1.0:503")
    try:
        op.execute_finished(context, event)
    finally:
        cluster.emulator.faults = Faults()
    after = clock.current().now()
    (record,) = TryHistory(context).finished()
    assert TryHistory(context).current() is None
    assert record.outcome == "all_succeeded"
    assert record.teardown_started_at is not None and record.teardown_ended_at is not None
    assert before <= record.teardown_started_at <= record.teardown_ended_at <= after
    assert record.requested_at is not None and record.requested_at < before
    assert record.start_deadline == pytest.approx(context["data_interval_end"].timestamp() + 7200)
    assert (record.zone, record.queue, record.provisioning_class) == (None, None, op.provisioning_class)
    assert (gang_objects(cluster, reservation.gang_name) != {}) == teardown_fails

"""What a try reports about itself: a lost member's run time counts as used, a clamped shrink says
the size it ran, the summary of every try ends the task log, and ``on_finish="keep"`` keeps exactly
the finished members."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangTryFailed
from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import ShrinkTo
from demo.cluster import CONN_ID
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance
from tests.e2e.test_fallbacks import RESERVATION_WINDOW
from tests.e2e.test_kill_and_adopt import gang_objects, running_pods


def test_a_lost_member_counts_as_used_for_the_time_it_ran(cluster_factory: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    template = simulated_pod(3600)
    del template["metadata"]["annotations"]["sim.gang.dev/run-seconds"]  # runs until deleted
    op = GangTrainingOperator(
        task_id="train", size=2, gpus=1, pod_template=template, deferrable=True, kubernetes_conn_id=CONN_ID
    )
    context = context_for(FakeTaskInstance("lost_member", "run-1"))
    run = deferred(op.execute_reserved, context, first_event(deferred(op.execute, context)))
    watched: dict[str, Any] = {}
    triggerer = threading.Thread(target=lambda: watched.update(event=first_event(run)))
    triggerer.start()  # the run trigger watches from launch on, as in a triggerer
    eventually(lambda: running_pods(cluster, run.gang_name) == 2, timeout=30.0, what="both members running")
    time.sleep(3.0)  # GPU time is wall time: let both members run a while before rank 1's node goes
    rank_one = naming.GangNames(run.gang_name).member(1)
    cluster.run(lambda: cluster.store.delete("v1/pods", rank_one, "default"))  # node gone
    triggerer.join(timeout=60)
    with pytest.raises(GangTryFailed, match="member_lost"):
        op.execute_finished(context, watched["event"])
    (record,) = TryHistory(context).finished()
    assert record.outcome == "member_lost"
    # Both members ran ~3 s of the ~3.5 s reserved; counting the lost one as idle would give under half.
    assert record.gpu_seconds_used >= 0.65 * record.gpu_seconds_reserved > 0
    eventually(lambda: gang_objects(cluster, run.gang_name) == {}, timeout=30.0, what="the gang's objects deleted")


def test_a_clamped_shrink_says_the_size_it_ran_and_the_story_ends_the_log(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster_factory("small", time_scale=60)  # at most four 1-GPU nodes
    dag = gang_dag(
        "shrink_clamped",
        retries=1,
        size=8,
        min_size=2,
        gpus=1,
        pod_template=simulated_pod(20),
        fallbacks=[ShrinkTo(6, divisible_by=4)],
        reservation_timeout=RESERVATION_WINDOW,
        deferrable=True,
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert [(item["step"], item["size"]) for item in summary["tries"]] == [
        ("as configured", 8),
        ("shrink to 6 members (a multiple of 4), ran 4", 4),
    ]
    assert summary["fallback_step"] == "shrink to 6 members (a multiple of 4), ran 4"
    assert all("gpu_hours_used" in item and "gpu_seconds_used" not in item for item in summary["tries"])
    assert sum(item["gpu_hours_reserved"] for item in summary["tries"]) == pytest.approx(
        summary["all_tries"]["gpu_hours_reserved"], abs=1e-5
    )
    log = capfd.readouterr().out
    story = log[log.rindex("Gang summary:") :]
    assert "try 1 | as configured | provisioning_request | 8 |" in story
    assert "try 2 | shrink to 6 members (a multiple of 4), ran 4 | provisioning_request | 4 | all_succeeded" in story
    assert "all tries:" in story


@pytest.mark.parametrize("mode", ["provisioning_request", "gates"])
def test_on_finish_keep_keeps_the_finished_members_and_their_owner_only(
    cluster_factory: Any, run_dag: Any, mode: str
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    dag = gang_dag(
        f"keep_{mode}",
        size=2,
        gpus=1,
        pod_template=simulated_pod(10),
        reservation=mode,
        distributed="torch",
        on_finish="keep",
        deferrable=True,
    )
    dag_run = run_dag(dag)
    gang = summary_of(dag_run)["gang"]
    left = gang_objects(cluster, gang)
    assert set(left) == {"v1/pods", "v1/configmaps"}, left  # no ProvisioningRequest, PodTemplate, Service
    pods = cluster.objects("v1/pods", label_selector=f"{naming.GANG_LABEL}={gang}")
    assert {pod["status"]["phase"] for pod in pods} == {"Succeeded"} and len(pods) == 2
    (owner,) = left["v1/configmaps"]
    cluster.run(lambda: cluster.store.delete("v1/configmaps", owner, "default"))
    eventually(
        lambda: gang_objects(cluster, gang) == {},
        timeout=30.0,
        what="the gang's objects deleted (the owner takes its members with it)",
    )


def test_timeouts_given_in_seconds_run_a_gang(cluster_factory: Any, run_dag: Any) -> None:
    """``reservation_timeout=60`` is right, as ``retry_delay=60`` is in Airflow."""
    cluster_factory("small", time_scale=60)
    dag = gang_dag(
        "seconds",
        size=2,
        gpus=1,
        pod_template=simulated_pod(10),
        deferrable=True,
        reservation_timeout=60,
        startup_timeout=60,
        run_timeout=120,
        unreachable_timeout=60,
    )
    assert task_instance(run_dag(dag)).state == "success"

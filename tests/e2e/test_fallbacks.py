"""The fallback ladder and the failure mapping, on simulated clusters, through ``dag.test()``."""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangTryFailed
from airflow_provider_gang.reservation.fallback import OtherZone, ShrinkTo
from airflow_provider_gang.reservation.phases import Reason
from demo.cluster import CONN_ID
from gang_sim.world.scenario import load_scenario
from tests.builders import GPU_TAINT
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance

TWO_ZONES: dict[str, Any] = {
    "name": "two-zones",
    "description": "zone-a has no GPU nodes and cannot get any; zone-b keeps four idle 1-GPU nodes",
    "seed": 3,
    "nodePools": [
        {
            "name": "cpu-a",
            "zone": "zone-a",
            "cpu": "8",
            "memory": "32Gi",
            "minNodes": 1,
            "maxNodes": 1,
            "initialNodes": 1,
        },
        {
            "name": "gpu-b",
            "zone": "zone-b",
            "gpuType": "nvidia-l4",
            "gpusPerNode": 1,
            "cpu": "8",
            "memory": "32Gi",
            "taints": [GPU_TAINT],
            "minNodes": 4,  # kept while idle: the autoscaler removes unneeded nodes after 10 simulated min
            "maxNodes": 4,
            "initialNodes": 4,
        },
    ],
}
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
RESERVATION_WINDOW = timedelta(seconds=15)
"""A wall-clock reservation timeout for tries that must succeed after one that must time out: a
succeeding try needs ~1 s of cluster time at 60x; the rest is margin for Airflow's wall-clock
overhead on a loaded machine (5 s was not always enough on 2 shared cores)."""


def test_refused_in_zone_a_then_granted_in_zone_b(cluster_factory: Any, run_dag: Any) -> None:
    cluster = cluster_factory(TWO_ZONES, time_scale=60)
    request_events: list[tuple[str, str]] = []

    def record(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource.endswith("/provisioningrequests") and event_type in ("ADDED", "DELETED"):
            request_events.append((event_type, obj["metadata"]["name"]))

    cluster.run(lambda: cluster.store.subscribe(record))
    dag = gang_dag(
        "zone_fallback",
        retries=1,
        size=4,
        gpus=1,
        pod_template=simulated_pod(30),
        zone="zone-a",
        strict_zone=True,
        provisioning_class=CHECK_CAPACITY,
        provisioning_parameters={"noRetry": "true"},
        fallbacks=[OtherZone("zone-b")],
        reservation_timeout=timedelta(seconds=30),
        deferrable=True,
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    tries = [(item["attempt"], item["step"], item["outcome"]) for item in summary["tries"]]
    assert tries == [(1, "as configured", "capacity_not_found"), (2, "other zone zone-b", "all_succeeded")]
    assert summary["zone"] == "zone-b"
    zone_a, zone_b = (item["gang"] for item in summary["tries"])
    # Zone A's request was withdrawn before zone B's was made; nothing of either try is left.
    assert request_events.index(("DELETED", zone_a)) < request_events.index(("ADDED", zone_b))
    assert cluster.objects("autoscaling.x-k8s.io/v1/provisioningrequests") == []
    assert cluster.objects("v1/pods") == []


def test_shrinks_from_8_to_4_after_the_reservation_times_out(cluster_factory: Any, run_dag: Any) -> None:
    cluster_factory("small", time_scale=60)  # at most four 1-GPU nodes
    dag = gang_dag(
        "shrink",
        retries=1,
        size=8,
        min_size=4,
        gpus=1,
        pod_template=simulated_pod(30),
        fallbacks=[ShrinkTo(4)],
        reservation_timeout=RESERVATION_WINDOW,
        deferrable=True,
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    first, second = summary["tries"]
    assert first["size"] == 8 and first["outcome"] in {"deadline", "capacity_not_found", "provisioning_failed"}
    assert second["size"] == 4 and second["step"] == "shrink to 4 members"
    assert (summary["size_requested"], summary["size_run"]) == (8, 4)
    assert summary["all_tries"]["gpu_hours_reserved"] >= summary["gpu_hours_reserved"] > 0


def test_start_by_missed_fails_without_retry(cluster_factory: Any, run_dag: Any) -> None:
    cluster_factory("small", time_scale=60)  # 8 GPUs never fit
    dag = gang_dag(
        "start_by",
        retries=3,
        size=8,
        gpus=1,
        pod_template=simulated_pod(30),
        start_by=timedelta(seconds=3),
        reservation_timeout=timedelta(minutes=5),
        deferrable=True,
    )
    dag_run = run_dag(dag)
    ti = task_instance(dag_run)
    assert ti.state == "failed"
    assert ti.try_number == 1  # AirflowFailException: the retries were not used


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "blocking"])
def test_one_rank_failing_tears_the_gang_down(
    cluster_factory: Any,
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    deferrable: bool,
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    scenario = dataclasses.replace(load_scenario("small"), local_process_images=("local/shell",))
    cluster = cluster_factory(scenario, time_scale=60)
    script = 'if [ "$RANK" = 2 ]; then sleep 1; echo "rank 2 gives up"; exit 3; fi; sleep 600'
    dag = gang_dag(
        f"rank_failure_{deferrable}",
        size=4,
        cpu="1",
        image="local/shell",
        command=["sh", "-c", script],
        distributed="torch",
        log_ranks="all",
        deferrable=deferrable,
        run_timeout=timedelta(seconds=120),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "failed"
    log = capfd.readouterr().out
    assert "member_failed" in log and "exit code 3" in log
    assert "[rank 2] rank 2 gives up" in log
    assert cluster.objects("v1/pods") == []  # ranks 0, 1 and 3 (sleeping 600 s) were deleted with it


def test_booking_expiring_before_launch_fails_the_try_for_a_retry(cluster_factory: Any) -> None:
    scenario = copy.deepcopy(TWO_ZONES)
    scenario["autoscaler"] = {"bookingSeconds": 600}
    cluster = cluster_factory(scenario, time_scale=None)  # manual clock
    op = GangTrainingOperator(
        task_id="train",
        size=4,
        gpus=1,
        pod_template=simulated_pod(30),
        zone="zone-b",
        provisioning_class=CHECK_CAPACITY,
        deferrable=True,
        kubernetes_conn_id=CONN_ID,
    )
    context = context_for(FakeTaskInstance("booking", "run-1"))
    trigger = deferred(op.execute, context)
    cluster.advance(30)  # the autoscaler's loop finds capacity: Provisioned, booked for 10 min
    event = first_event(trigger)
    assert event["reason"] == "reserved"
    cluster.advance(660)  # the worker resumes 11 minutes later: the booking has expired
    with pytest.raises(GangTryFailed) as caught:
        op.execute_reserved(context, event)
    assert caught.value.reason is Reason.BOOKING_EXPIRED
    assert cluster.objects("v1/pods") == []  # no member was launched against the expired booking

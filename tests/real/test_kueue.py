"""Kueue mode on real Kueue 0.17 (its webhooks suspend the gang's Indexed Job, its scheduler admits it):
quota admission; partial admission (4 asked, quota for 2: Kueue lowers the Job's ``parallelism`` and the
gang's world ConfigMap says 2, what the members would read - kwok runs no containers); a ClusterQueue
whose ProvisioningRequest admission check has Kueue create the request that the real
cluster-autoscaler provisions; ``OtherQueue`` after the first queue leaves the gang pending; a missing
LocalQueue refused by the precheck before anything is created.

Upstream: sigs.k8s.io/kueue ``pkg/controller/jobs/job`` (partial admission sets ``parallelism``),
``pkg/controller/admissionchecks/provisioning`` (the request Kueue creates).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.reservation.fallback import OtherQueue
from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod, summary_of, task_instance
from tests.real.recording import recording

pytestmark = pytest.mark.timeout(600)


def kueue_gang(dag_id: str, queue: str, size: int, **arguments: Any) -> Any:
    options: dict[str, Any] = {
        "gpus": 1,
        "cpu": "1",
        "pod_template": simulated_pod(5),
        "reservation": "kueue",
        "kueue_queue": queue,
        "deferrable": True,
        "reservation_timeout": timedelta(minutes=3),
        "startup_timeout": timedelta(minutes=2),
    }
    options.update(arguments)
    return gang_dag(dag_id, size=size, **options)


def test_quota_admission_runs_the_gang(cluster: Any) -> None:
    dag_run = run_dag_test(kueue_gang("real_kueue_quota", "team", 2))
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["reservation_mode"], summary["queue"], summary["size_run"]) == ("kueue", "team", 2)
    assert summary["exit_codes"] == {"0": 0, "1": 0}


def test_partial_admission_lowers_parallelism_and_the_world_size(cluster: Any) -> None:
    kubeconfig = str(cluster.cluster.kubeconfig_path)
    with recording(kubeconfig, "batch/v1/jobs", "v1/configmaps") as seen:
        dag_run = run_dag_test(kueue_gang("real_kueue_partial", "team", 4, min_size=2))
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["size_requested"], summary["size_run"]) == (4, 2)
    jobs = [job for job in seen["batch/v1/jobs"].versions if not job[1]["spec"].get("suspend", True)]
    assert jobs, "the Job was never unsuspended"
    assert {job["spec"]["parallelism"] for _, job in jobs} == {2}
    worlds = [
        config_map
        for _, config_map in seen["v1/configmaps"].versions
        if config_map["metadata"]["name"].endswith("-world")
    ]
    assert {config_map.get("data", {}).get("size") for config_map in worlds} - {None} == {"2"}


def test_admission_check_has_kueue_request_the_capacity_and_the_gang_starts(cluster: Any) -> None:
    kubeconfig = str(cluster.cluster.kubeconfig_path)
    with recording(kubeconfig, "autoscaling.x-k8s.io/v1/provisioningrequests") as seen:
        dag_run = run_dag_test(kueue_gang("real_kueue_check", "provisioned", 3))
    assert task_instance(dag_run).state == "success"
    assert summary_of(dag_run)["size_run"] == 3
    requests = seen["autoscaling.x-k8s.io/v1/provisioningrequests"].versions
    created_by_kueue = {obj["metadata"]["name"] for _, obj in requests}
    assert created_by_kueue, "Kueue created no ProvisioningRequest"
    conditions = {
        (condition["type"], condition["status"])
        for _, obj in requests
        for condition in obj.get("status", {}).get("conditions", [])
    }
    assert ("Provisioned", "True") in conditions


def test_other_queue_after_the_first_leaves_the_gang_pending(cluster: Any) -> None:
    dag = kueue_gang(
        "real_kueue_other_queue",
        "team",
        4,
        retries=1,
        fallbacks=[OtherQueue("provisioned")],
        reservation_timeout=timedelta(seconds=30),
    )
    dag_run = run_dag_test(dag)
    assert task_instance(dag_run).state == "success"
    tries = [(item["step"], item["outcome"]) for item in summary_of(dag_run)["tries"]]
    assert tries == [("as configured", "deadline"), ("other queue provisioned", "all_succeeded")]


def test_a_missing_local_queue_is_refused_by_the_precheck(cluster: Any, capfd: pytest.CaptureFixture[str]) -> None:
    dag_run = run_dag_test(kueue_gang("real_kueue_missing_queue", "team-x", 2, retries=2))
    ti = task_instance(dag_run)
    assert (ti.state, ti.try_number) == ("failed", 1)
    assert "LocalQueue 'team-x' does not exist in namespace 'default'" in capfd.readouterr().out

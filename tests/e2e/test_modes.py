"""A gang succeeds in each reservation mode, on the simulated cluster, through ``dag.test()``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.links import reservation_page_url
from airflow_provider_gang.reservation.fallback import OtherQueue
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "blocking"])
def test_provisioning_request_gang_succeeds(cluster_factory: Any, run_dag: Any, deferrable: bool) -> None:
    cluster = cluster_factory("small", time_scale=60)
    dag = gang_dag(
        f"pr_success_{deferrable}",
        size=4,
        gpus=1,
        pod_template=simulated_pod(60),
        reservation="provisioning_request",
        deferrable=deferrable,
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=30),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert summary["size_run"] == 4
    assert summary["reservation_mode"] == "provisioning_request"
    assert summary["exit_codes"] == {"0": 0, "1": 0, "2": 0, "3": 0}
    assert summary["gpu_hours_reserved"] >= summary["gpu_hours_used"] > 0
    assert cluster.objects("v1/pods") == []
    assert extra_link(dag_run) == reservation_page_url(dag_run.dag_id, dag_run.run_id, "train")


def extra_link(dag_run: Any) -> Any:
    """The URL Airflow stored for the task's "Gang reservation" button (the API server reads only this)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(
                run_id=dag_run.run_id, key="_link_GangReservationLink", task_ids="train", dag_ids=dag_run.dag_id
            )
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def test_gated_gang_succeeds(cluster_factory: Any, run_dag: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    dag = gang_dag(
        "gates_success",
        size=4,
        gpus=1,
        pod_template=simulated_pod(60),
        reservation="gates",
        deferrable=True,
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=30),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["reservation_mode"], summary["size_run"]) == ("gates", 4)
    assert summary["exit_codes"] == {"0": 0, "1": 0, "2": 0, "3": 0}
    assert cluster.objects("v1/pods") == []


KUEUE = "kueue.x-k8s.io/v1beta2"


def kueue_queues(cluster: Any, quotas: dict[str, int]) -> None:
    """A ResourceFlavor for the GPU pool, and per name a ClusterQueue of that many GPUs with its LocalQueue."""
    cluster.create(
        f"{KUEUE}/resourceflavors",
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "l4"}, "spec": {}},
    )
    for name, gpus in quotas.items():
        resources = [
            {"name": "cpu", "nominalQuota": "64"},
            {"name": "memory", "nominalQuota": "256Gi"},
            {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)},
        ]
        cluster.create(
            f"{KUEUE}/clusterqueues",
            {
                "apiVersion": KUEUE,
                "kind": "ClusterQueue",
                "metadata": {"name": f"cq-{name}"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                            "flavors": [{"name": "l4", "resources": resources}],
                        }
                    ],
                },
            },
        )
        cluster.create(
            f"{KUEUE}/localqueues",
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"clusterQueue": f"cq-{name}"},
            },
            "default",
        )


EXCEEDS_SMALL_QUEUE = (
    "waiting for quota: ExceedsMaxQuota - couldn't assign flavors to pod set main: insufficient "
    "quota for nvidia.com/gpu in flavor l4, request > maximum capacity (4 > 2)"
)


def test_kueue_queue_over_quota_falls_back_to_another_queue(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    kueue_queues(cluster, {"team-small": 2, "team-big": 4})
    dag = gang_dag(
        "kueue_fallback",
        retries=1,
        size=4,
        gpus=1,
        pod_template=simulated_pod(30),
        reservation="kueue",
        kueue_queue="team-small",
        fallbacks=[OtherQueue("team-big")],
        deferrable=True,
        reservation_timeout=timedelta(seconds=15),
        startup_timeout=timedelta(seconds=60),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    tries = [(item["step"], item["outcome"]) for item in summary["tries"]]
    assert tries == [("as configured", "deadline"), ("other queue team-big", "all_succeeded")]
    captured = capfd.readouterr()
    logs = "\n".join([captured.out, captured.err, caplog.text])
    assert EXCEEDS_SMALL_QUEUE in logs, logs[-3000:]  # Kueue's pending reason, in the first try's log
    assert (summary["reservation_mode"], summary["queue"], summary["size_run"]) == ("kueue", "team-big", 4)
    assert summary["exit_codes"] == {"0": 0, "1": 0, "2": 0, "3": 0}  # the Job's pods, by completion index
    assert cluster.objects("v1/pods") == [] and cluster.objects("batch/v1/jobs") == []


def test_kueue_partial_admission_runs_the_admitted_members(cluster_factory: Any, run_dag: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    kueue_queues(cluster, {"team-two": 2})
    dag = gang_dag(
        "kueue_partial",
        size=4,
        min_size=2,
        gpus=1,
        pod_template=simulated_pod(30),
        reservation="kueue",
        kueue_queue="team-two",
        deferrable=True,
        reservation_timeout=timedelta(seconds=30),
        startup_timeout=timedelta(seconds=60),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["size_requested"], summary["size_run"]) == (4, 2)
    assert summary["exit_codes"] == {"0": 0, "1": 0}
    assert cluster.objects("v1/pods") == []

"""A Dynamic Workload Scheduler run cut at ``maxRunDurationSeconds`` (``CapacityRevoked``) moves the
next try to another provisioning class by default: ``OtherProvisioningClass`` answers
``capacity_revoked`` without an ``applies_to``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_provider_gang.reservation.fallback import OtherProvisioningClass
from tests.builders import GPU_TAINT
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance


def gpu_pool(name: str, *, queued: bool) -> dict[str, Any]:
    return {
        "name": name,
        "zone": "zone-a",
        "gpuType": "nvidia-l4",
        "gpusPerNode": 1,
        "cpu": "8",
        "memory": "32Gi",
        "taints": [GPU_TAINT],
        "maxNodes": 2,
        "provisioningDelaySeconds": 60,
        "queuedProvisioning": queued,
    }


SCENARIO = {
    "name": "dws-and-on-demand",
    "nodePools": [
        {"name": "cpu", "zone": "zone-a", "cpu": "8", "memory": "32Gi", "initialNodes": 1},
        gpu_pool("dws", queued=True),
        gpu_pool("l4", queued=False),
    ],
}


def test_a_revoked_queued_provisioning_run_moves_to_another_class(cluster_factory: Any, run_dag: Any) -> None:
    cluster = cluster_factory(SCENARIO, time_scale=60)
    dag = gang_dag(
        "dws_revoked",
        retries=1,
        size=2,
        gpus=1,
        pod_template=simulated_pod(600),  # 10 simulated minutes
        provisioning_class="queued-provisioning.gke.io",
        provisioning_parameters={"maxRunDurationSeconds": "180"},  # the nodes go after 3 minutes
        fallbacks=[OtherProvisioningClass("best-effort-atomic-scale-up.autoscaling.x-k8s.io")],
        reservation_timeout=timedelta(seconds=60),
        deferrable=True,
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert [(item["step"], item["outcome"]) for item in summary["tries"]] == [
        ("as configured", "capacity_revoked"),
        ("other provisioning class best-effort-atomic-scale-up.autoscaling.x-k8s.io", "all_succeeded"),
    ]
    assert summary["provisioning_class"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert cluster.objects("v1/pods") == []

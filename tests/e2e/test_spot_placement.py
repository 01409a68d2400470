"""On-demand gangs never land on spot nodes, spot gangs only on spot nodes - on a cluster whose spot
pool is untainted (GKE's default) and has idle nodes that would fit an on-demand gang."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.reservation.fallback import OnDemand
from airflow_provider_gang.reservation.phases import Reason
from tests.builders import GPU_TAINT
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of

SPOT_LABEL = "cloud.google.com/gke-spot"


def gpu_pool(name: str, *, spot: bool, initial: int, maximum: int) -> dict[str, Any]:
    return {
        "name": name,
        "zone": "zone-a",
        "gpuType": "nvidia-l4",
        "gpusPerNode": 4,
        "cpu": "48",
        "memory": "192Gi",
        "taints": [GPU_TAINT],
        "initialNodes": initial,
        "maxNodes": maximum,
        "provisioningDelaySeconds": 60,
        "spot": spot,
    }


SCENARIO = {
    "name": "spot-and-on-demand",
    "zones": {"zone-a": {"gpuQuota": 32}},
    "nodePools": [
        {"name": "cpu", "zone": "zone-a", "cpu": "16", "memory": "64Gi", "initialNodes": 1, "maxNodes": 1},
        gpu_pool("l4-spot", spot=True, initial=2, maximum=2),  # idle spot nodes: 8 GPUs ready now
        gpu_pool("l4", spot=False, initial=0, maximum=2),
    ],
}


@pytest.mark.parametrize("spot", [False, True], ids=["on-demand", "spot"])
def test_members_land_on_the_capacity_type_they_asked_for(cluster_factory: Any, run_dag: Any, spot: bool) -> None:
    cluster = cluster_factory(SCENARIO, time_scale=60)
    placed: dict[str, str] = {}

    def record(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource == "v1/pods" and (obj.get("spec") or {}).get("nodeName"):
            placed[obj["metadata"]["name"]] = obj["spec"]["nodeName"]

    unsubscribe = cluster.run(lambda: cluster.store.subscribe(record))
    dag = gang_dag(
        f"placement_{'spot' if spot else 'on_demand'}",
        size=4,
        gpus=2,
        spot=spot,
        pod_template=simulated_pod(20),
        deferrable=True,
        reservation_timeout=timedelta(seconds=60),
    )
    dag_run = run_dag(dag)
    cluster.run(unsubscribe)
    assert summary_of(dag_run)["size_run"] == 4
    nodes = {
        node["metadata"]["name"]: (node["metadata"].get("labels") or {}).get(SPOT_LABEL)
        for node in cluster.objects("v1/nodes", namespace="")
    }
    used = {placed[pod] for pod in placed}
    assert used and all((nodes.get(node) == "true") is spot for node in used), (used, nodes)


@pytest.mark.parametrize("reservation", ["provisioning_request", "workload"])
def test_the_on_demand_step_leaves_spot_capacity(cluster_factory: Any, run_dag: Any, reservation: str) -> None:
    """Try 1 asks for spot and is cut short (its deadline: the spot pool is too small); OnDemand moves
    try 2 to nodes without the spot label - a new ProvisioningRequest, or a new PodGroup."""
    pools = [
        SCENARIO["nodePools"][0],
        gpu_pool("l4-spot", spot=True, initial=1, maximum=1),
        gpu_pool("l4", spot=False, initial=0, maximum=2),
    ]
    cluster_factory({**SCENARIO, "nodePools": pools}, time_scale=60)
    dag = gang_dag(
        f"placement_fallback_{reservation}",
        reservation=reservation,
        retries=1,
        size=4,
        gpus=2,
        spot=True,
        pod_template=simulated_pod(20),
        deferrable=True,
        reservation_timeout=timedelta(seconds=8),
        fallbacks=[OnDemand()],
    )
    dag_run = run_dag(dag)
    summary = summary_of(dag_run)
    assert [(item["step"], item["outcome"]) for item in summary["tries"]] == [
        ("as configured", Reason.DEADLINE.value),
        ("spot to on-demand", "all_succeeded"),
    ]

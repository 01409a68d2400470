"""Reserved capacity first: a gang with ``use_reservation`` runs on the reservation's nodes when it
fits, and ``LeaveReservation()`` moves the next try to ordinary on-demand nodes when the reservation
is full (another team's pods hold all of it). A pod selecting the reservation fits only its nodes
(``gang_sim.controllers.fit``); the reservation's nodes take other pods too, as the real
kube-scheduler's do (``tests/real/test_fallbacks.py``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.reservation.fallback import LeaveReservation
from airflow_provider_gang.reservation.manifests.pods import RESERVATION_LABEL
from airflow_provider_gang.reservation.phases import Reason
from tests.builders import GPU_TAINT, pod
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance

RESERVATION = "a100-reservation"
SHIPPED_RESERVATION = "l4-reservation"
"""The reservation of the shipped ``reserved`` scenario (``gang_sim/world/scenarios/reserved.yaml``)."""


def gpu_pool(name: str, *, reservation: str | None, initial: int, maximum: int) -> dict[str, Any]:
    return {
        "name": name,
        "zone": "zone-a",
        "gpuType": "nvidia-a100",
        "gpusPerNode": 4,
        "cpu": "48",
        "memory": "192Gi",
        "taints": [GPU_TAINT],
        "initialNodes": initial,
        "maxNodes": maximum,
        "provisioningDelaySeconds": 60,
        **({"reservation": reservation} if reservation else {}),
    }


def other_team_pod(index: int) -> dict[str, Any]:
    """A pod of another team that consumes one whole reserved node and runs until deleted."""
    resources = {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}
    spec = {
        "nodeSelector": {RESERVATION_LABEL: RESERVATION},
        "tolerations": [GPU_TAINT],
        "containers": [{"name": "main", "image": "other:1", "resources": resources}],
    }
    return pod(f"other-team-{index}", spec=spec, namespace="default")


def full_reservation() -> dict[str, Any]:
    """A reservation of two nodes (``maxNodes``: it does not grow), both held by another team's pods,
    and an on-demand pool with idle nodes."""
    return {
        "name": "reserved-and-on-demand",
        "nodePools": [
            {"name": "cpu", "zone": "zone-a", "cpu": "16", "memory": "64Gi", "initialNodes": 1, "maxNodes": 1},
            gpu_pool("a100-reserved", reservation=RESERVATION, initial=2, maximum=2),
            gpu_pool("a100", reservation=None, initial=2, maximum=2),
        ],
        "objects": [other_team_pod(index) for index in range(2)],
    }


class Placements:
    """Every binding and every reserved node the store commits from now on (nodes may be scaled down
    before the test looks)."""

    def __init__(self, cluster: Any, reservation: str) -> None:
        self.pods: dict[str, str] = {}
        self.reservation = reservation
        self.reserved: set[str] = {
            node["metadata"]["name"] for node in cluster.objects("v1/nodes", namespace="") if self._is_reserved(node)
        }
        cluster.run(lambda: cluster.store.subscribe(self._record))

    def _is_reserved(self, node: dict[str, Any]) -> bool:
        return (node["metadata"].get("labels") or {}).get(RESERVATION_LABEL) == self.reservation

    def _record(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource == "v1/pods" and (obj.get("spec") or {}).get("nodeName"):
            self.pods[obj["metadata"]["name"]] = obj["spec"]["nodeName"]
        elif resource == "v1/nodes" and self._is_reserved(obj):
            self.reserved.add(obj["metadata"]["name"])

    def members(self, gang: str) -> dict[str, str]:
        return {pod: node for pod, node in self.pods.items() if pod.startswith(f"{gang}-")}


def test_a_gang_that_fits_runs_on_the_reservation(cluster_factory: Any, run_dag: Any) -> None:
    """The shipped ``reserved`` scenario: no node exists yet; the autoscaler creates the gang's two
    nodes from the reservation (the on-demand pool could serve it too, had it not asked)."""
    cluster = cluster_factory("reserved", time_scale=60)
    placed = Placements(cluster, SHIPPED_RESERVATION)
    dag = gang_dag(
        "reservation_fits",
        retries=1,
        size=2,
        gpus=4,
        pod_template=simulated_pod(20),
        use_reservation=SHIPPED_RESERVATION,
        fallbacks=[LeaveReservation()],
        deferrable=True,
        reservation_timeout=timedelta(seconds=30),
    )
    dag_run = run_dag(dag)
    summary = summary_of(dag_run)
    assert [(item["step"], item["outcome"]) for item in summary["tries"]] == [("as configured", "all_succeeded")]
    assert summary["reservation_name"] == SHIPPED_RESERVATION
    members = placed.members(summary["gang"])
    assert len(members) == 2 and set(members.values()) <= placed.reserved, (members, placed.reserved)


@pytest.mark.parametrize("reservation", ["provisioning_request", "workload"])
def test_a_full_reservation_falls_back_to_on_demand(cluster_factory: Any, run_dag: Any, reservation: str) -> None:
    cluster = cluster_factory(full_reservation(), time_scale=60)
    placed = Placements(cluster, RESERVATION)
    dag = gang_dag(
        f"reservation_full_{reservation}",
        reservation=reservation,
        retries=1,
        size=2,
        gpus=4,
        pod_template=simulated_pod(20),
        use_reservation=RESERVATION,
        fallbacks=[LeaveReservation()],
        deferrable=True,
        reservation_timeout=timedelta(seconds=15),
    )  # wall clock: try 2 must be granted within it
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    first, second = summary["tries"]
    assert first["step"] == "as configured"
    assert first["outcome"] in {
        Reason.DEADLINE.value,
        Reason.CAPACITY_NOT_FOUND.value,
        Reason.PROVISIONING_FAILED.value,
    }
    assert (second["step"], second["outcome"]) == ("leave the reservation for on-demand", "all_succeeded")
    assert summary["reservation_name"] is None
    members = placed.members(second["gang"])
    assert len(members) == 2 and not set(members.values()) & placed.reserved, (members, placed.reserved)
    other_team = {
        pod["spec"]["nodeName"]
        for pod in cluster.objects("v1/pods")
        if pod["metadata"]["name"].startswith("other-team-")
    }
    assert other_team == placed.reserved and len(other_team) == 2  # the reservation stayed theirs throughout

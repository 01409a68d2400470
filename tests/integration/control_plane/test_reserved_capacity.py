"""Reserved node pools (GKE specific reservations): pods selecting the reservation use only its nodes
and wait for them - through the scheduler, the incremental scale-up and ProvisioningRequests - while
its nodes, like any node, take every other pod that fits (the real kube-scheduler and
cluster-autoscaler know no reservations: ``tests/real/test_fallbacks.py``). Runs the shipped
``reserved`` scenario."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gang_sim.testing.pytest_plugin import SimCluster
from gang_sim.world.cloud import RESERVATION_LABEL
from tests.builders import GPU_TOLERATION, pod
from tests.integration.control_plane.conftest import gpu_scenario

RESERVATION = "l4-reservation"
SELECTS = {"nodeSelector": {RESERVATION_LABEL: RESERVATION}}


def _spec(gpus: int = 4, **extra: Any) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    container = {"name": "w", "image": "trainer", "resources": {"requests": requests, "limits": requests}}
    return {"restartPolicy": "Never", "tolerations": [GPU_TOLERATION], "containers": [container], **extra}


def _create(cluster: SimCluster, name: str, spec: dict[str, Any]) -> None:
    cluster.core.create_namespaced_pod("default", pod(name, spec=spec))


def _pool_of(cluster: SimCluster, pod: str) -> str | None:
    node = cluster.core.read_namespaced_pod(pod, "default").spec.node_name
    if node is None:
        return None
    return str(cluster.core.read_node(node).metadata.labels["cloud.google.com/gke-nodepool"])


def test_the_reservation_scales_for_its_pods_and_they_never_leave_it(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    cluster = sim_cluster("reserved")
    for index in range(3):
        _create(cluster, f"reserved-{index}", _spec(**SELECTS))
    cluster.advance(400)
    pools = {name: _pool_of(cluster, name) for name in ("reserved-0", "reserved-1", "reserved-2")}
    assert pools == {"reserved-0": "l4-reserved", "reserved-1": "l4-reserved", "reserved-2": None}
    labels = [node.metadata.labels for node in cluster.core.list_node().items]
    assert sum(1 for item in labels if item.get(RESERVATION_LABEL) == RESERVATION) == 2  # the reservation's VMs
    # the third reserved pod waits for the reservation, never for other capacity
    cluster.core.delete_namespaced_pod("reserved-0", "default")
    cluster.advance(1)
    assert _pool_of(cluster, "reserved-2") == "l4-reserved"


def test_an_idle_reserved_node_takes_a_pod_that_does_not_select_it(sim_cluster: Callable[..., SimCluster]) -> None:
    reserved = {
        "name": "reserved",
        "zone": "us-central1-a",
        "gpuType": "nvidia-l4",
        "gpusPerNode": 1,
        "initialNodes": 1,
        "maxNodes": 1,
        "reservation": RESERVATION,
    }
    cluster = sim_cluster(gpu_scenario(pool={"maxNodes": 0}, extra_pools=[reserved]))
    _create(cluster, "other", _spec(gpus=1))
    cluster.advance(5)
    assert _pool_of(cluster, "other") == "reserved"


def test_provisioning_requests_keep_to_the_reservation_and_count_its_nodes_for_others(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    reserved = {
        "name": "reserved",
        "zone": "us-central1-a",
        "gpuType": "nvidia-l4",
        "gpusPerNode": 4,
        "cpu": "48",
        "memory": "192Gi",
        "initialNodes": 2,
        "maxNodes": 2,
        "reservation": RESERVATION,
    }
    cluster = sim_cluster(
        gpu_scenario(pool={"gpusPerNode": 4, "cpu": "48", "memory": "192Gi", "maxNodes": 2}, extra_pools=[reserved])
    )
    cluster.create_pod_template("selects", _spec(**SELECTS))
    cluster.create_pod_template("plain", _spec())
    cluster.create_request("too-big", "selects", 3, "best-effort-atomic-scale-up.autoscaling.x-k8s.io")
    cluster.create_request("plain-check", "plain", 2, "check-capacity.autoscaling.x-k8s.io")
    cluster.advance(20)
    # a selecting pod may use the reservation's two nodes only; the same two idle nodes are capacity
    # for pods that do not select it, as for the real autoscaler's scheduling simulation
    assert cluster.conditions(cluster.request("too-big"))["Provisioned"] == ("False", "CapacityIsNotFound")
    assert cluster.conditions(cluster.request("plain-check"))["Provisioned"] == ("True", "CapacityIsFound")
    cluster.advance(120)
    pools = [node.metadata.labels["cloud.google.com/gke-nodepool"] for node in cluster.core.list_node().items]
    assert sorted(pools) == ["reserved", "reserved"]

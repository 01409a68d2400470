"""Reserved node pools (GKE specific reservations): only pods selecting the reservation use its
nodes - through the scheduler, the incremental scale-up and ProvisioningRequests - and a pod that
selects it never lands elsewhere. Runs the shipped ``reserved`` scenario."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gang_sim.controllers.fit import RESERVATION_LABEL, RESERVATION_MISMATCH
from gang_sim.testing.pytest_plugin import SimCluster
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


def test_the_reservation_scales_for_its_pods_only_and_they_never_leave_it(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    cluster = sim_cluster("reserved")
    for index in range(3):
        _create(cluster, f"reserved-{index}", _spec(**SELECTS))
    _create(cluster, "on-demand", _spec())
    cluster.advance(400)
    pools = {name: _pool_of(cluster, name) for name in ("reserved-0", "reserved-1", "reserved-2", "on-demand")}
    assert pools == {
        "reserved-0": "l4-reserved",
        "reserved-1": "l4-reserved",
        "reserved-2": None,
        "on-demand": "l4-on-demand",
    }
    labels = [node.metadata.labels for node in cluster.core.list_node().items]
    assert sum(1 for item in labels if item.get(RESERVATION_LABEL) == RESERVATION) == 2  # the reservation's VMs
    # the third reserved pod waits for the reservation, never for other capacity
    cluster.core.delete_namespaced_pod("reserved-0", "default")
    cluster.advance(1)
    assert _pool_of(cluster, "reserved-2") == "l4-reserved"
    # freed reserved capacity is not an on-demand pod's
    cluster.core.delete_namespaced_pod("reserved-1", "default")
    _create(cluster, "on-demand-2", _spec())
    cluster.advance(1)
    assert _pool_of(cluster, "on-demand-2") is None
    cluster.advance(120)
    assert _pool_of(cluster, "on-demand-2") == "l4-on-demand"


def test_idle_reserved_nodes_refuse_other_pods(sim_cluster: Callable[..., SimCluster]) -> None:
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
    cluster.advance(120)
    pod = cluster.core.read_namespaced_pod("other", "default")
    assert pod.spec.node_name is None
    scheduled = {item.type: item for item in pod.status.conditions}["PodScheduled"]
    assert RESERVATION_MISMATCH in scheduled.message


def test_provisioning_requests_keep_to_the_reservation(sim_cluster: Callable[..., SimCluster]) -> None:
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
    cluster.create_request("plain-check", "plain", 1, "check-capacity.autoscaling.x-k8s.io")
    cluster.advance(20)
    # two idle reserved nodes, yet no capacity for a pod that does not select the reservation
    assert cluster.conditions(cluster.request("plain-check"))["Provisioned"] == ("False", "CapacityIsNotFound")
    cluster.create_request("selects-check", "selects", 2, "check-capacity.autoscaling.x-k8s.io")
    cluster.create_request("too-big", "selects", 3, "best-effort-atomic-scale-up.autoscaling.x-k8s.io")
    cluster.create_request("plain-atomic", "plain", 2, "best-effort-atomic-scale-up.autoscaling.x-k8s.io")
    cluster.advance(20)
    assert cluster.conditions(cluster.request("selects-check"))["Provisioned"] == ("True", "CapacityIsFound")
    assert cluster.conditions(cluster.request("too-big"))["Provisioned"] == ("False", "CapacityIsNotFound")
    assert cluster.conditions(cluster.request("plain-atomic"))["Provisioned"] == ("True", "CapacityIsProvisioned")
    cluster.advance(120)
    pools = [node.metadata.labels["cloud.google.com/gke-nodepool"] for node in cluster.core.list_node().items]
    assert sorted(pools) == ["gpu", "gpu", "reserved", "reserved"]

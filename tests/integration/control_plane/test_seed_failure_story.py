"""The seed document's failure story, reproduced through the API (reference 7.A side effects).

Eight one-GPU pods on a cluster that adds one 1-GPU node per minute:

- without a reservation the autoscaler scales up incrementally: for minutes some pods Run while the
  rest stay Pending (a DDP job would sit idle, paying for the GPUs it already has);
- with a ``best-effort-atomic-scale-up`` ProvisioningRequest and pods consuming it, the consuming pods
  trigger no scale-up of their own; all 8 nodes are requested at once, so no pod is bound until all 8
  are bound together.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import gpu_pod_spec, pod
from tests.integration.control_plane.conftest import gpu_scenario

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def _create_workers(cluster: SimCluster, annotations: dict[str, str] | None = None) -> None:
    for index in range(8):
        cluster.core.create_namespaced_pod(
            "default", pod(f"worker-{index}", spec=gpu_pod_spec(), annotations=annotations or {})
        )


def _bound_and_running(cluster: SimCluster) -> tuple[int, int]:
    pods = cluster.pods()
    return sum(1 for pod in pods if pod.spec.node_name), sum(1 for pod in pods if pod.status.phase == "Running")


def test_without_reservation_pods_start_piecemeal(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    _create_workers(cluster)
    history = []
    for _ in range(10):
        cluster.advance(30)
        history.append(_bound_and_running(cluster))
    # After 3 simulated minutes some pods run while others are still pending.
    bound, running = history[5]
    assert 0 < running < 8 and bound < 8, history
    # Scale-up came one node at a time: never more than one more pod bound per 30 simulated seconds.
    bound_counts = [bound for bound, _ in history]
    assert all(later - earlier <= 1 for earlier, later in itertools.pairwise(bound_counts)), history
    assert len(set(bound_counts)) >= 4, history
    pending = [pod for pod in cluster.pods() if pod.status.phase == "Pending"]
    assert pending and all(
        any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in pod.status.conditions or [])
        for pod in pending
        if not pod.spec.node_name
    )
    assert cluster.events("TriggeredScaleUp")
    assert any("Insufficient nvidia.com/gpu" in event.message for event in cluster.events("FailedScheduling"))


def test_with_provisioning_request_all_bind_together(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request("gang", "worker", 8, ATOMIC)
    _create_workers(
        cluster,
        {
            "autoscaling.x-k8s.io/consume-provisioning-request": "gang",
            "autoscaling.x-k8s.io/provisioning-class-name": ATOMIC,
        },
    )
    seen = []
    for _ in range(10):
        cluster.advance(15)
        seen.append(_bound_and_running(cluster)[0])
    assert set(seen) <= {0, 8}, seen
    assert seen[-1] == 8
    conditions = cluster.conditions(cluster.request("gang"))
    assert conditions["Accepted"] == ("True", "Accepted")
    assert conditions["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert conditions["BookingExpired"] == ("True", "CapacityBookingConsumed")
    assert cluster.events("NotTriggerScaleUp")
    assert not cluster.events("TriggeredScaleUp")

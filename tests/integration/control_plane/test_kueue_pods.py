"""Golden tests of Kueue's plain-Pod integration (reference 7.E): pod groups and single pods."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import gpu_pod_spec, pod
from tests.integration.control_plane.conftest import gpu_scenario
from tests.integration.control_plane.kueue_setup import condition_map, resource_groups, setup_queues

KUEUE_GATES = ["kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"]
"""Kueue 0.17's pod webhook, TAS on: both gates; starting a pod without a topology assignment
removes both (pkg/controller/jobs/pod/pod_webhook.go, pod_controller.go ``prepare``)."""


def kueue_pod(name: str, *, group: str | None = None, total: int = 0, run_seconds: int | None = None) -> dict[str, Any]:
    """A plain GPU pod in LocalQueue ``lq``; with ``group``, a member of a pod group of ``total`` pods."""
    labels = {"kueue.x-k8s.io/queue-name": "lq"}
    annotations: dict[str, str] = {}
    if group is not None:
        labels["kueue.x-k8s.io/pod-group-name"] = group
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    if run_seconds is not None:
        annotations["sim.gang.dev/run-seconds"] = str(run_seconds)
    return pod(name, labels=labels, spec=gpu_pod_spec(), annotations=annotations)


def test_plain_pod_group_is_gated_then_admitted_together(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"initialNodes": 3}))
    setup_queues(cluster, class_name=None)
    for index in range(3):
        cluster.core.create_namespaced_pod(
            "default", kueue_pod(f"gang-abc-{index}", group="gang-abc", total=3, run_seconds=60)
        )
        pod = cluster.core.read_namespaced_pod(f"gang-abc-{index}", "default")
        assert pod.metadata.labels["kueue.x-k8s.io/managed"] == "true"
        assert "kueue.x-k8s.io/managed" in pod.metadata.finalizers
        if index < 2:  # the third pod completes the group: Kueue admits and ungates at once
            assert [gate.name for gate in pod.spec.scheduling_gates] == KUEUE_GATES
            cluster.advance(1)
            assert cluster.workloads() == []  # fewer runnable pods than the total count
            scheduled = next(
                c
                for c in cluster.core.read_namespaced_pod(f"gang-abc-{index}", "default").status.conditions
                if c.type == "PodScheduled"
            )
            assert (scheduled.status, scheduled.reason) == ("False", "SchedulingGated")
    cluster.advance(1)
    workload = cluster.kueue("workloads", "gang-abc", "default")
    assert workload["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
    assert condition_map(workload)["Admitted"] == ("True", "Admitted")
    cluster.advance(5)
    pods = cluster.pods()
    assert all(not pod.spec.scheduling_gates and pod.status.phase == "Running" for pod in pods)
    assert all(pod.spec.node_selector == {"cloud.google.com/gke-nodepool": "gpu"} for pod in pods)
    cluster.advance(60)
    assert condition_map(cluster.kueue("workloads", "gang-abc", "default"))["Finished"] == ("True", "Succeeded")
    assert all(not pod.metadata.finalizers for pod in cluster.pods())  # Kueue lets go of finished pods
    cluster.core.delete_namespaced_pod("gang-abc-0", "default")
    assert [pod.metadata.name for pod in cluster.pods()] == ["gang-abc-1", "gang-abc-2"]


def test_evicted_pod_group_loses_its_pods(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(
        gpu_scenario(pool={"initialNodes": 2, "maxNodes": 2}, kueue={"waitForPodsReadyTimeoutSeconds": 300})
    )
    setup_queues(cluster, class_name=None)
    for index in range(3):
        cluster.core.create_namespaced_pod("default", kueue_pod(f"gang-{index}", group="gang", total=3))
    cluster.advance(10)
    assert sorted(pod.status.phase for pod in cluster.pods()) == ["Pending", "Running", "Running"]
    cluster.advance(300)
    assert condition_map(cluster.kueue("workloads", "gang", "default"))["Evicted"] == ("True", "PodsReadyTimeout")
    assert cluster.pods() == []  # deleted by Kueue (finalizers released); the creator must recreate them


def test_single_plain_pod_gets_its_own_workload(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"initialNodes": 1}))
    setup_queues(cluster, class_name=None, gpus=0)  # no GPU quota: the pod stays gated
    pod = cluster.core.create_namespaced_pod("default", kueue_pod("solo", run_seconds=30))
    cluster.advance(1)
    (workload,) = cluster.workloads()
    assert workload["metadata"]["name"].startswith("pod-solo-")
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == pod.metadata.uid
    assert condition_map(workload)["QuotaReserved"][0] == "False"
    assert [gate.name for gate in cluster.core.read_namespaced_pod("solo", "default").spec.scheduling_gates] == (
        KUEUE_GATES
    )
    cluster.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        "cq",
        {"spec": {"resourceGroups": resource_groups(1)}},
    )
    cluster.advance(5)
    assert cluster.core.read_namespaced_pod("solo", "default").status.phase == "Running"
    cluster.advance(30)
    assert condition_map(cluster.kueue("workloads", workload["metadata"]["name"], "default"))["Finished"] == (
        "True",
        "Succeeded",
    )
    assert not cluster.core.read_namespaced_pod("solo", "default").metadata.finalizers

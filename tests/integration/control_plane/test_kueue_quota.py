"""Kueue quota: queue order, partial admission, cohort borrowing and queue status, through the API."""

from __future__ import annotations

from collections.abc import Callable

from gang_sim.testing.pytest_plugin import SimCluster
from tests.integration.control_plane.conftest import gpu_scenario
from tests.integration.control_plane.kueue_setup import condition_map, create_job, resource_groups, setup_queues


def test_partial_admission_lowers_parallelism(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    setup_queues(cluster, class_name=None, gpus=3)
    create_job(cluster, count=4, annotations={"kueue.x-k8s.io/job-min-parallelism": "2"})
    cluster.advance(1)
    (workload,) = cluster.workloads()
    assert workload["spec"]["podSets"][0]["minCount"] == 2
    assert workload["status"]["admission"]["podSetAssignments"][0]["count"] == 3
    assert cluster.batch.read_namespaced_job("train", "default").spec.parallelism == 3


def test_partial_admission_can_lower_completions_with_parallelism(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    setup_queues(cluster, class_name=None, gpus=3)
    create_job(
        cluster,
        count=4,
        run_seconds=60,
        annotations={
            "kueue.x-k8s.io/job-min-parallelism": "2",
            "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
        },
    )
    cluster.advance(1)
    job = cluster.batch.read_namespaced_job("train", "default")
    assert (job.spec.parallelism, job.spec.completions) == (3, 3)
    cluster.advance(5 * 60)
    job = cluster.batch.read_namespaced_job("train", "default")
    assert (job.status.succeeded, job.status.completed_indexes) == (3, "0-2")
    (workload,) = cluster.workloads()
    assert condition_map(workload)["Finished"] == ("True", "Succeeded")


def test_quota_is_held_in_queue_order(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    setup_queues(cluster, class_name=None, gpus=4)
    create_job(cluster, "first", count=4, run_seconds=100)
    cluster.advance(1)
    create_job(cluster, "second", count=2, run_seconds=100)
    cluster.advance(1)
    states = {
        w["metadata"]["annotations"]["kueue.x-k8s.io/job-owner-name"]: condition_map(w)["QuotaReserved"]
        for w in cluster.workloads()
    }
    assert states["first"] == ("True", "QuotaReserved")
    assert states["second"][0] == "False"
    cluster.advance(10 * 60)  # first finishes and frees its quota
    states = {
        w["metadata"]["annotations"]["kueue.x-k8s.io/job-owner-name"]: condition_map(w)["QuotaReserved"]
        for w in cluster.workloads()
    }
    assert states["second"] == ("True", "QuotaReserved")


def test_queue_status_counts_workloads(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    setup_queues(cluster, class_name=None, gpus=4)
    create_job(cluster, "first", count=4)
    cluster.advance(1)
    create_job(cluster, "second", count=2)
    cluster.advance(1)
    status = cluster.kueue("clusterqueues", "cq")["status"]
    assert (status["pendingWorkloads"], status["admittedWorkloads"]) == (1, 1)
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Active": "True"}
    local = cluster.kueue("localqueues", "lq", "default")["status"]
    assert (local["pendingWorkloads"], local["admittedWorkloads"]) == (1, 1)


def test_cluster_queues_borrow_within_their_cohort(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    cluster.create_kueue(
        "resourceflavors", "ResourceFlavor", "l4", {"nodeLabels": {"cloud.google.com/gke-nodepool": "gpu"}}
    )
    for name in ("cq", "lender"):
        cluster.create_kueue(
            "clusterqueues",
            "ClusterQueue",
            name,
            {
                "cohortName": "team",
                "namespaceSelector": {},
                "resourceGroups": resource_groups(4),
            },
        )
    cluster.create_kueue("localqueues", "LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="default")
    create_job(cluster, count=6)
    cluster.advance(1)
    (workload,) = cluster.workloads()
    assert condition_map(workload)["Admitted"] == ("True", "Admitted")  # 4 own + 2 borrowed GPUs
    assert workload["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"] == "6"
    create_job(cluster, "second", count=3)
    cluster.advance(1)
    second = next(w for w in cluster.workloads() if w["metadata"]["name"].startswith("job-second-"))
    assert condition_map(second)["QuotaReserved"][0] == "False"  # the cohort has only 2 GPUs left

"""Golden tests of the Kueue state machines (reference 7.C ProvisioningRequest check, 7.D
waitForPodsReady, 7.E plain pod groups), observed through the API with the official client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.integration.control_plane.conftest import SimCluster, gpu_pod_spec, gpu_scenario

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK = "check-capacity.autoscaling.x-k8s.io"


def _setup_queues(
    cluster: SimCluster,
    *,
    class_name: str | None = ATOMIC,
    gpus: int = 8,
    parameters: dict[str, str] | None = None,
    backoff_limit: int = 3,
) -> None:
    cluster.create_kueue(
        "resourceflavors", "ResourceFlavor", "l4", {"nodeLabels": {"cloud.google.com/gke-nodepool": "gpu"}}
    )
    strategy: dict[str, Any] = {}
    if class_name is not None:
        cluster.create_kueue(
            "provisioningrequestconfigs",
            "ProvisioningRequestConfig",
            "prc",
            {
                "provisioningClassName": class_name,
                "managedResources": ["nvidia.com/gpu"],
                "parameters": parameters or {},
                "retryStrategy": {
                    "backoffLimitCount": backoff_limit,
                    "backoffBaseSeconds": 60,
                    "backoffMaxSeconds": 1800,
                },
            },
        )
        cluster.create_kueue(
            "admissionchecks",
            "AdmissionCheck",
            "prov",
            {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prc"},
            },
        )
        strategy = {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]}}
    cluster.create_kueue(
        "clusterqueues",
        "ClusterQueue",
        "cq",
        {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "l4",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "100"},
                                {"name": "memory", "nominalQuota": "400Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)},
                            ],
                        }
                    ],
                }
            ],
            **strategy,
        },
    )
    cluster.create_kueue("localqueues", "LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="default")


def _create_job(
    cluster: SimCluster,
    name: str = "train",
    count: int = 4,
    run_seconds: int = 300,
    annotations: dict[str, str] | None = None,
) -> Any:
    return cluster.batch.create_namespaced_job(
        "default",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "annotations": annotations or {}},
            "spec": {
                "parallelism": count,
                "completions": count,
                "completionMode": "Indexed",
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": {"sim.gang.dev/run-seconds": str(run_seconds)}},
                    "spec": gpu_pod_spec(),
                },
            },
        },
    )


def _conditions(workload: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (workload.get("status") or {}).get("conditions") or []}


def test_job_with_provisioning_check_reserves_provisions_admits_and_finishes(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    cluster = sim_cluster(gpu_scenario())
    _setup_queues(cluster)
    job = _create_job(cluster)
    assert job.spec.suspend is True  # the webhook suspends at creation
    cluster.advance(1)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    assert name.startswith("job-train-") and len(name) == len("job-train-") + 5
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == job.metadata.uid
    assert workload["metadata"]["ownerReferences"][0]["name"] == "train"
    assert _conditions(workload)["QuotaReserved"] == ("True", "QuotaReserved")
    assert _conditions(workload)["Admitted"] == ("False", "UnsatisfiedAdmissionChecks")
    assert cluster.events("CreatedWorkload")
    request_name = f"{name}-prov-1"
    request = cluster.request(request_name)  # created after reservation, PodTemplates first
    assert request["spec"]["podSets"] == [{"podTemplateRef": {"name": f"ppt-{request_name}-main"}, "count": 4}]
    template = cluster.core.read_namespaced_pod_template(f"ppt-{request_name}-main", "default")
    assert template.template.spec.node_selector == {"cloud.google.com/gke-nodepool": "gpu"}
    assert cluster.pods() == []  # still suspended
    cluster.advance(10)
    workload = cluster.kueue("workloads", name, "default")
    assert _conditions(workload)["Admitted"] == ("True", "Admitted")
    (check,) = workload["status"]["admissionChecks"]
    assert check["state"] == "Ready"
    assert check["podSetUpdates"][0]["annotations"] == {
        "autoscaling.x-k8s.io/consume-provisioning-request": request_name,
        "autoscaling.x-k8s.io/provisioning-class-name": ATOMIC,
    }
    assert cluster.batch.read_namespaced_job("train", "default").spec.suspend is False
    cluster.advance(60)
    pods = cluster.pods()
    assert len(pods) == 4 and all(
        pod.metadata.annotations["autoscaling.x-k8s.io/consume-provisioning-request"] == request_name for pod in pods
    )
    cluster.advance(10)
    assert _conditions(cluster.kueue("workloads", name, "default"))["PodsReady"] == ("True", "Started")
    cluster.advance(300)
    assert _conditions(cluster.kueue("workloads", name, "default"))["Finished"] == ("True", "Succeeded")


def test_failed_request_is_retried_with_a_new_attempt_then_rejected(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    _setup_queues(cluster, class_name=CHECK, parameters={"noRetry": "true"}, backoff_limit=1)
    _create_job(cluster)
    cluster.advance(1)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    cluster.advance(10)  # CA: check-capacity with noRetry fails -> check Retry -> evicted
    workload = cluster.kueue("workloads", name, "default")
    conditions = _conditions(workload)
    assert conditions["Evicted"] == ("True", "AdmissionCheck")
    assert conditions["QuotaReserved"][0] == "False"
    assert conditions["Requeued"] == ("False", "AdmissionCheck")
    (check,) = workload["status"]["admissionChecks"]
    assert check["retryCount"] == 1 and check["requeueAfterSeconds"] == 60
    assert "Retrying after failure" in check["message"]
    assert (
        cluster.custom.list_namespaced_custom_object("autoscaling.x-k8s.io", "v1", "default", "provisioningrequests")[
            "items"
        ]
        == []
    )  # cleaned up on eviction
    cluster.advance(61)  # backoff over: requeued, reserved again, attempt 2
    assert cluster.request(f"{name}-prov-2")
    cluster.advance(20)  # attempt 2 fails too: beyond backoffLimitCount=1 -> Rejected -> deactivated
    workload = cluster.kueue("workloads", name, "default")
    assert workload["spec"]["active"] is False
    assert _conditions(workload)["Evicted"] == ("True", "Deactivated")
    assert cluster.batch.read_namespaced_job("train", "default").spec.suspend is True


def test_partial_admission_lowers_parallelism(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    _setup_queues(cluster, class_name=None, gpus=3)
    _create_job(cluster, count=4, annotations={"kueue.x-k8s.io/job-min-parallelism": "2"})
    cluster.advance(1)
    (workload,) = cluster.workloads()
    assert workload["spec"]["podSets"][0]["minCount"] == 2
    assert workload["status"]["admission"]["podSetAssignments"][0]["count"] == 3
    assert cluster.batch.read_namespaced_job("train", "default").spec.parallelism == 3


def test_partial_admission_can_lower_completions_with_parallelism(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    _setup_queues(cluster, class_name=None, gpus=3)
    _create_job(
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
    assert _conditions(workload)["Finished"] == ("True", "Succeeded")


def test_quota_is_held_in_queue_order(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    _setup_queues(cluster, class_name=None, gpus=4)
    _create_job(cluster, "first", count=4, run_seconds=100)
    cluster.advance(1)
    _create_job(cluster, "second", count=2, run_seconds=100)
    cluster.advance(1)
    states = {
        w["metadata"]["annotations"]["kueue.x-k8s.io/job-owner-name"]: _conditions(w)["QuotaReserved"]
        for w in cluster.workloads()
    }
    assert states["first"] == ("True", "QuotaReserved")
    assert states["second"][0] == "False"
    cluster.advance(10 * 60)  # first finishes and frees its quota
    states = {
        w["metadata"]["annotations"]["kueue.x-k8s.io/job-owner-name"]: _conditions(w)["QuotaReserved"]
        for w in cluster.workloads()
    }
    assert states["second"] == ("True", "QuotaReserved")


def test_wait_for_pods_ready_timeout_evicts_and_requeues(sim_cluster: Callable[..., SimCluster]) -> None:
    # The pool is capped at 2 nodes: a 4-pod Job is admitted by quota but can never be fully ready.
    cluster = sim_cluster(gpu_scenario(pool={"maxNodes": 2}))
    _setup_queues(cluster, class_name=None)
    _create_job(cluster, run_seconds=100_000)
    cluster.advance(1)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    assert _conditions(workload)["Admitted"] == ("True", "Admitted")
    cluster.advance(10 * 60)
    assert _conditions(cluster.kueue("workloads", name, "default"))["PodsReady"] == ("False", "WaitForStart")
    cluster.advance(20 * 60)  # 30 min after admission
    workload = cluster.kueue("workloads", name, "default")
    assert _conditions(workload)["Evicted"] == ("True", "PodsReadyTimeout")
    assert workload["status"]["requeueState"]["count"] == 1
    assert cluster.batch.read_namespaced_job("train", "default").spec.suspend is True
    cluster.advance(1)
    assert [pod for pod in cluster.pods() if pod.status.phase in ("Pending", "Running")] == []
    cluster.advance(60)  # requeue backoff 60 s * 2^0, then admitted again
    assert _conditions(cluster.kueue("workloads", name, "default"))["Admitted"] == ("True", "Admitted")


def test_plain_pod_group_is_gated_then_admitted_together(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"initialNodes": 3}))
    _setup_queues(cluster, class_name=None)
    for index in range(3):
        cluster.core.create_namespaced_pod(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"gang-abc-{index}",
                    "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/pod-group-name": "gang-abc"},
                    "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3", "sim.gang.dev/run-seconds": "60"},
                },
                "spec": gpu_pod_spec(),
            },
        )
        pod = cluster.core.read_namespaced_pod(f"gang-abc-{index}", "default")
        assert pod.metadata.labels["kueue.x-k8s.io/managed"] == "true"
        assert "kueue.x-k8s.io/managed" in pod.metadata.finalizers
        if index < 2:  # the third pod completes the group: Kueue admits and ungates at once
            assert [gate.name for gate in pod.spec.scheduling_gates] == ["kueue.x-k8s.io/admission"]
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
    assert _conditions(workload)["Admitted"] == ("True", "Admitted")
    cluster.advance(5)
    pods = cluster.pods()
    assert all(not pod.spec.scheduling_gates and pod.status.phase == "Running" for pod in pods)
    assert all(pod.spec.node_selector == {"cloud.google.com/gke-nodepool": "gpu"} for pod in pods)
    cluster.advance(60)
    assert _conditions(cluster.kueue("workloads", "gang-abc", "default"))["Finished"] == ("True", "Succeeded")
    assert all(not pod.metadata.finalizers for pod in cluster.pods())  # Kueue lets go of finished pods
    cluster.core.delete_namespaced_pod("gang-abc-0", "default")
    assert [pod.metadata.name for pod in cluster.pods()] == ["gang-abc-1", "gang-abc-2"]


def test_capacity_revoked_after_admission_deactivates_the_workload(sim_cluster: Callable[..., SimCluster]) -> None:
    scenario = gpu_scenario(pool={"queuedProvisioning": True, "provisioningDelaySeconds": 60})
    cluster = sim_cluster(scenario)
    _setup_queues(cluster, class_name="queued-provisioning.gke.io", parameters={"maxRunDurationSeconds": "1800"})
    _create_job(cluster, run_seconds=100_000)
    cluster.advance(90)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    assert _conditions(workload)["Admitted"] == ("True", "Admitted")
    cluster.advance(11 * 60)  # BookingExpired after admission is ignored
    assert _conditions(cluster.kueue("workloads", name, "default"))["Admitted"] == ("True", "Admitted")
    cluster.advance(20 * 60)  # maxRunDurationSeconds: CapacityRevoked -> Rejected -> deactivated
    workload = cluster.kueue("workloads", name, "default")
    assert workload["spec"]["active"] is False
    assert workload["status"]["admissionChecks"][0]["state"] == "Rejected"
    assert _conditions(workload)["Evicted"] == ("True", "Deactivated")


def test_requeuing_limit_deactivates_after_repeated_pods_ready_timeouts(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(
        gpu_scenario(pool={"maxNodes": 2}, kueue={"requeueLimit": 1, "waitForPodsReadyTimeoutSeconds": 600})
    )
    _setup_queues(cluster, class_name=None)
    _create_job(cluster, run_seconds=100_000)
    cluster.advance(1)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    cluster.advance(600)  # first timeout: evicted, requeued after 60 s
    assert _conditions(cluster.kueue("workloads", name, "default"))["Evicted"] == ("True", "PodsReadyTimeout")
    cluster.advance(61 + 600)  # readmitted, second timeout: beyond requeueLimit=1
    workload = cluster.kueue("workloads", name, "default")
    assert workload["spec"]["active"] is False
    assert _conditions(workload)["DeactivationTarget"] == ("True", "RequeuingLimitExceeded")


def test_queue_status_counts_workloads(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    _setup_queues(cluster, class_name=None, gpus=4)
    _create_job(cluster, "first", count=4)
    cluster.advance(1)
    _create_job(cluster, "second", count=2)
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
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "l4",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "100"},
                                    {"name": "memory", "nominalQuota": "400Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": "4"},
                                ],
                            }
                        ],
                    }
                ],
            },
        )
    cluster.create_kueue("localqueues", "LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="default")
    _create_job(cluster, count=6)
    cluster.advance(1)
    (workload,) = cluster.workloads()
    assert _conditions(workload)["Admitted"] == ("True", "Admitted")  # 4 own + 2 borrowed GPUs
    assert workload["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"] == "6"
    _create_job(cluster, "second", count=3)
    cluster.advance(1)
    second = next(w for w in cluster.workloads() if w["metadata"]["name"].startswith("job-second-"))
    assert _conditions(second)["QuotaReserved"][0] == "False"  # the cohort has only 2 GPUs left


def test_evicted_pod_group_loses_its_pods(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(
        gpu_scenario(pool={"initialNodes": 2, "maxNodes": 2}, kueue={"waitForPodsReadyTimeoutSeconds": 300})
    )
    _setup_queues(cluster, class_name=None)
    for index in range(3):
        cluster.core.create_namespaced_pod(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"gang-{index}",
                    "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/pod-group-name": "gang"},
                    "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
                },
                "spec": gpu_pod_spec(),
            },
        )
    cluster.advance(10)
    assert sorted(pod.status.phase for pod in cluster.pods()) == ["Pending", "Running", "Running"]
    cluster.advance(300)
    assert _conditions(cluster.kueue("workloads", "gang", "default"))["Evicted"] == ("True", "PodsReadyTimeout")
    assert cluster.pods() == []  # deleted by Kueue (finalizers released); the creator must recreate them


def test_reactivated_workload_is_queued_again(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(
        gpu_scenario(pool={"maxNodes": 2}, kueue={"requeueLimit": 0, "waitForPodsReadyTimeoutSeconds": 600})
    )
    _setup_queues(cluster, class_name=None)
    _create_job(cluster, run_seconds=100_000)
    cluster.advance(601)  # PodsReady timeout with requeueLimit 0: deactivated at once
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    assert workload["spec"]["active"] is False
    cluster.custom.patch_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "default", "workloads", name, {"spec": {"active": True}}
    )
    cluster.advance(1)
    conditions = _conditions(cluster.kueue("workloads", name, "default"))
    assert conditions["Requeued"] == ("True", "Reactivated")
    assert conditions["Admitted"] == ("True", "Admitted")


def test_single_plain_pod_gets_its_own_workload(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"initialNodes": 1}))
    _setup_queues(cluster, class_name=None, gpus=0)  # no GPU quota: the pod stays gated
    pod = cluster.core.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "solo",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                "annotations": {"sim.gang.dev/run-seconds": "30"},
            },
            "spec": gpu_pod_spec(),
        },
    )
    cluster.advance(1)
    (workload,) = cluster.workloads()
    assert workload["metadata"]["name"].startswith("pod-solo-")
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == pod.metadata.uid
    assert _conditions(workload)["QuotaReserved"][0] == "False"
    assert [gate.name for gate in cluster.core.read_namespaced_pod("solo", "default").spec.scheduling_gates] == [
        "kueue.x-k8s.io/admission"
    ]
    cluster.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        "cq",
        {
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "l4",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "100"},
                                    {"name": "memory", "nominalQuota": "400Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": "1"},
                                ],
                            }
                        ],
                    }
                ]
            }
        },
    )
    cluster.advance(5)
    assert cluster.core.read_namespaced_pod("solo", "default").status.phase == "Running"
    cluster.advance(30)
    assert _conditions(cluster.kueue("workloads", workload["metadata"]["name"], "default"))["Finished"] == (
        "True",
        "Succeeded",
    )
    assert not cluster.core.read_namespaced_pod("solo", "default").metadata.finalizers

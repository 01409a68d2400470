"""Golden tests of Kueue Workloads for Jobs (reference 7.C ProvisioningRequest admission check, 7.D
waitForPodsReady), observed through the API with the official client."""

from __future__ import annotations

from collections.abc import Callable

from gang_sim.testing.pytest_plugin import SimCluster
from tests.integration.control_plane.conftest import gpu_scenario
from tests.integration.control_plane.kueue_setup import ATOMIC, CHECK, condition_map, create_job, setup_queues


def test_job_with_provisioning_check_reserves_provisions_admits_and_finishes(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    cluster = sim_cluster(gpu_scenario())
    setup_queues(cluster)
    job = create_job(cluster)
    assert job.spec.suspend is True  # the webhook suspends at creation
    cluster.advance(1)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    assert name.startswith("job-train-") and len(name) == len("job-train-") + 5
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == job.metadata.uid
    assert workload["metadata"]["ownerReferences"][0]["name"] == "train"
    assert condition_map(workload)["QuotaReserved"] == ("True", "QuotaReserved")
    assert "Admitted" not in condition_map(workload)  # written once the check is Ready
    assert cluster.events("CreatedWorkload")
    request_name = f"{name}-prov-1"
    request = cluster.request(request_name)  # created after reservation, PodTemplates first
    assert request["spec"]["podSets"] == [{"podTemplateRef": {"name": f"ppt-{request_name}-main"}, "count": 4}]
    template = cluster.core.read_namespaced_pod_template(f"ppt-{request_name}-main", "default")
    assert template.template.spec.node_selector == {"cloud.google.com/gke-nodepool": "gpu"}
    assert cluster.pods() == []  # still suspended
    cluster.advance(10)
    workload = cluster.kueue("workloads", name, "default")
    assert condition_map(workload)["Admitted"] == ("True", "Admitted")
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
    assert condition_map(cluster.kueue("workloads", name, "default"))["PodsReady"] == ("True", "Started")
    cluster.advance(300)
    assert condition_map(cluster.kueue("workloads", name, "default"))["Finished"] == ("True", "Succeeded")


def test_failed_request_is_retried_with_a_new_attempt_then_rejected(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    setup_queues(cluster, class_name=CHECK, parameters={"noRetry": "true"}, backoff_limit=1)
    create_job(cluster)
    cluster.advance(1)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    cluster.advance(10)  # CA: check-capacity with noRetry fails -> check Retry -> evicted
    workload = cluster.kueue("workloads", name, "default")
    conditions = condition_map(workload)
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
    assert condition_map(workload)["Evicted"] == ("True", "Deactivated")
    assert cluster.batch.read_namespaced_job("train", "default").spec.suspend is True


def test_wait_for_pods_ready_timeout_evicts_and_requeues(sim_cluster: Callable[..., SimCluster]) -> None:
    # The pool is capped at 2 nodes: a 4-pod Job is admitted by quota but can never be fully ready.
    cluster = sim_cluster(gpu_scenario(pool={"maxNodes": 2}))
    setup_queues(cluster, class_name=None)
    create_job(cluster, run_seconds=100_000)
    cluster.advance(1)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    assert condition_map(workload)["Admitted"] == ("True", "Admitted")
    cluster.advance(10 * 60)
    assert condition_map(cluster.kueue("workloads", name, "default"))["PodsReady"] == ("False", "WaitForStart")
    cluster.advance(20 * 60)  # 30 min after admission
    workload = cluster.kueue("workloads", name, "default")
    assert condition_map(workload)["Evicted"] == ("True", "PodsReadyTimeout")
    assert workload["status"]["requeueState"]["count"] == 1
    assert cluster.batch.read_namespaced_job("train", "default").spec.suspend is True
    cluster.advance(1)
    assert [pod for pod in cluster.pods() if pod.status.phase in ("Pending", "Running")] == []
    cluster.advance(60)  # requeue backoff 60 s * 2^0, then admitted again
    assert condition_map(cluster.kueue("workloads", name, "default"))["Admitted"] == ("True", "Admitted")


def test_capacity_revoked_after_admission_deactivates_the_workload(sim_cluster: Callable[..., SimCluster]) -> None:
    scenario = gpu_scenario(pool={"queuedProvisioning": True, "provisioningDelaySeconds": 60})
    cluster = sim_cluster(scenario)
    setup_queues(cluster, class_name="queued-provisioning.gke.io", parameters={"maxRunDurationSeconds": "1800"})
    create_job(cluster, run_seconds=100_000)
    cluster.advance(90)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    assert condition_map(workload)["Admitted"] == ("True", "Admitted")
    cluster.advance(11 * 60)  # BookingExpired after admission is ignored
    assert condition_map(cluster.kueue("workloads", name, "default"))["Admitted"] == ("True", "Admitted")
    cluster.advance(20 * 60)  # maxRunDurationSeconds: CapacityRevoked -> Rejected -> deactivated
    workload = cluster.kueue("workloads", name, "default")
    assert workload["spec"]["active"] is False
    assert workload["status"]["admissionChecks"][0]["state"] == "Rejected"
    assert condition_map(workload)["Evicted"] == ("True", "Deactivated")


def test_requeuing_limit_deactivates_after_repeated_pods_ready_timeouts(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(
        gpu_scenario(pool={"maxNodes": 2}, kueue={"requeueLimit": 1, "waitForPodsReadyTimeoutSeconds": 600})
    )
    setup_queues(cluster, class_name=None)
    create_job(cluster, run_seconds=100_000)
    cluster.advance(1)
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    cluster.advance(600)  # first timeout: evicted, requeued after 60 s
    assert condition_map(cluster.kueue("workloads", name, "default"))["Evicted"] == ("True", "PodsReadyTimeout")
    cluster.advance(61 + 600)  # readmitted, second timeout: beyond requeueLimit=1
    workload = cluster.kueue("workloads", name, "default")
    assert workload["spec"]["active"] is False
    assert condition_map(workload)["DeactivationTarget"] == ("True", "RequeuingLimitExceeded")


def test_reactivated_workload_is_queued_again(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(
        gpu_scenario(pool={"maxNodes": 2}, kueue={"requeueLimit": 0, "waitForPodsReadyTimeoutSeconds": 600})
    )
    setup_queues(cluster, class_name=None)
    create_job(cluster, run_seconds=100_000)
    cluster.advance(601)  # PodsReady timeout with requeueLimit 0: deactivated at once
    (workload,) = cluster.workloads()
    name = workload["metadata"]["name"]
    assert workload["spec"]["active"] is False
    cluster.custom.patch_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "default", "workloads", name, {"spec": {"active": True}}
    )
    cluster.advance(1)
    conditions = condition_map(cluster.kueue("workloads", name, "default"))
    assert conditions["Requeued"] == ("True", "Reactivated")
    assert conditions["Admitted"] == ("True", "Admitted")

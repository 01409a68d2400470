"""Scheduler, kubelet (simulated runtime) and Job controller, observed with kubectl, the sync client
and kubernetes_asyncio; plus the robustness rule: a malformed object yields an Event, not a crash."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio import client as async_client
from kubernetes_asyncio import config as async_config

from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import gpu_pod_spec, pod
from tests.integration.control_plane.conftest import KUBECTL, gpu_scenario


def _job(
    name: str,
    *,
    parallelism: int,
    completions: int,
    annotations: dict[str, str],
    backoff_limit: int = 6,
    indexed: bool = False,
    suspend: bool = False,
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": parallelism,
            "completions": completions,
            "backoffLimit": backoff_limit,
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "suspend": suspend,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                },
            },
        },
    }


def _condition_reasons(job: Any) -> dict[str, str]:
    return {c.type: c.reason for c in job.status.conditions or [] if c.status == "True"}


def test_pod_lifecycle_with_container_statuses_and_exit_codes(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster("small")
    for name, code in (("ok", "0"), ("bad", "3")):
        spec = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
        annotations = {"sim.gang.dev/run-seconds": "30", "sim.gang.dev/exit-code": code}
        cluster.core.create_namespaced_pod("default", pod(name, spec=spec, annotations=annotations))
    cluster.advance(1)
    ok_pod = cluster.core.read_namespaced_pod("ok", "default")
    assert ok_pod.spec.node_name and ok_pod.status.phase == "Pending"
    assert ok_pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    assert ipaddress.ip_address(ok_pod.status.pod_ip).is_loopback
    assert cluster.core.read_namespaced_pod("bad", "default").status.pod_ip != ok_pod.status.pod_ip
    cluster.advance(1)
    ok_pod = cluster.core.read_namespaced_pod("ok", "default")
    assert ok_pod.status.phase == "Running" and ok_pod.status.container_statuses[0].ready
    assert {c.type: c.status for c in ok_pod.status.conditions}["Ready"] == "True"
    cluster.advance(30)
    ok, bad = (cluster.core.read_namespaced_pod(name, "default") for name in ("ok", "bad"))
    assert (ok.status.phase, ok.status.container_statuses[0].state.terminated.exit_code) == ("Succeeded", 0)
    assert (bad.status.phase, bad.status.container_statuses[0].state.terminated.exit_code) == ("Failed", 3)
    assert bad.status.container_statuses[0].state.terminated.reason == "Error"


def test_kubectl_shows_gated_and_unschedulable_pods(sim_cluster: Callable[..., SimCluster]) -> None:
    cpu_pool = {"name": "cpu", "zone": "us-central1-a", "minNodes": 1, "maxNodes": 1}
    cluster = sim_cluster(gpu_scenario(pool={"maxNodes": 0}, extra_pools=[cpu_pool]))
    gated = pod("gated", spec=gpu_pod_spec(schedulingGates=[{"name": "example.com/gang"}]))
    cluster.core.create_namespaced_pod("default", gated)
    cluster.core.create_namespaced_pod("default", pod("stuck", spec=gpu_pod_spec()))
    cluster.advance(10)
    # The emulator serves no server-side Table printing, so read the PodScheduled reason by jsonpath.
    template = '{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="PodScheduled")].reason}{"\\n"}{end}'
    listing = subprocess.run(
        [KUBECTL, "--kubeconfig", str(cluster.harness.kubeconfig_path), "get", "pods", "-o", f"jsonpath={template}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    statuses = dict(line.split("=") for line in listing.splitlines())
    assert statuses == {"gated": "SchedulingGated", "stuck": "Unschedulable"}
    described = json.loads(
        subprocess.run(
            [KUBECTL, "--kubeconfig", str(cluster.harness.kubeconfig_path), "get", "pod", "stuck", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    )
    scheduled = next(c for c in described["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["reason"] == "Unschedulable"
    assert scheduled["message"] == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
        "1 Preemption is not helpful for scheduling."
    )


def test_indexed_job_runs_to_completion(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster("small")
    cluster.batch.create_namespaced_job(
        "default",
        _job("idx", parallelism=2, completions=4, indexed=True, annotations={"sim.gang.dev/run-seconds": "60"}),
    )
    cluster.advance(1)
    pods = cluster.pods("default", "batch.kubernetes.io/job-name=idx")
    assert sorted(pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] for pod in pods) == ["0", "1"]
    assert all(
        pod.metadata.owner_references[0].kind == "Job" and pod.metadata.owner_references[0].controller for pod in pods
    )
    assert all(
        pod.spec.hostname == f"idx-{pod.metadata.annotations['batch.kubernetes.io/job-completion-index']}"
        for pod in pods
    )
    cluster.advance(2)
    assert cluster.batch.read_namespaced_job("idx", "default").status.active == 2
    cluster.advance(70)
    cluster.advance(70)
    job = cluster.batch.read_namespaced_job("idx", "default")
    assert (job.status.succeeded, job.status.completed_indexes) == (4, "0-3")
    assert _condition_reasons(job) == {"SuccessCriteriaMet": "CompletionsReached", "Complete": "CompletionsReached"}


def test_job_fails_past_backoff_limit(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster("small")
    cluster.batch.create_namespaced_job(
        "default",
        _job(
            "flaky",
            parallelism=1,
            completions=1,
            backoff_limit=1,
            annotations={"sim.gang.dev/run-seconds": "5", "sim.gang.dev/exit-code": "1"},
        ),
    )
    for _ in range(4):
        cluster.advance(10)
    job = cluster.batch.read_namespaced_job("flaky", "default")
    assert job.status.failed == 2
    assert _condition_reasons(job) == {"FailureTarget": "BackoffLimitExceeded", "Failed": "BackoffLimitExceeded"}


def test_suspend_deletes_active_pods_and_resume_recreates_them(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster("small")
    cluster.batch.create_namespaced_job("default", _job("pausable", parallelism=2, completions=2, annotations={}))
    cluster.advance(3)
    assert len(cluster.pods("default", "batch.kubernetes.io/job-name=pausable")) == 2
    cluster.batch.patch_namespaced_job("pausable", "default", {"spec": {"suspend": True}})
    cluster.advance(1)
    assert cluster.pods("default", "batch.kubernetes.io/job-name=pausable") == []
    job = cluster.batch.read_namespaced_job("pausable", "default")
    assert _condition_reasons(job) == {"Suspended": "JobSuspended"}
    cluster.batch.patch_namespaced_job("pausable", "default", {"spec": {"suspend": False}})
    cluster.advance(1)
    assert len(cluster.pods("default", "batch.kubernetes.io/job-name=pausable")) == 2
    assert {c.type: c.reason for c in cluster.batch.read_namespaced_job("pausable", "default").status.conditions}[
        "Suspended"
    ] == "JobResumed"


def test_malformed_annotation_records_an_event_and_other_pods_still_run(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster("small")
    for name, seconds in (("broken", "soon"), ("fine", "10")):
        spec = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
        annotations = {"sim.gang.dev/run-seconds": seconds}
        cluster.core.create_namespaced_pod("default", pod(name, spec=spec, annotations=annotations))
    cluster.advance(20)
    (event,) = [e for e in cluster.events("ReconcileError") if e.involved_object.name == "broken"]
    assert event.type == "Warning" and "sim.gang.dev/run-seconds must be a number" in event.message
    assert cluster.core.read_namespaced_pod("fine", "default").status.phase == "Succeeded"


async def test_asyncio_client_watches_a_pod_become_running(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster("small")
    api = await async_config.new_client_from_config(str(cluster.harness.kubeconfig_path))
    async with api:
        core = async_client.CoreV1Api(api)
        await core.create_namespaced_pod("default", pod("watched", image="busybox"))
        cluster.advance(5)
        watched = await core.read_namespaced_pod("watched", "default")
        assert watched.status.phase == "Running"
        events = await core.list_namespaced_event("default", field_selector="involvedObject.name=watched")
        assert "Scheduled" in {event.reason for event in events.items}


def test_malformed_custom_objects_are_reported_not_fatal(sim_cluster: Callable[..., SimCluster]) -> None:
    cpu_pool = {"name": "cpu", "zone": "us-central1-a", "minNodes": 1, "maxNodes": 1}
    cluster = sim_cluster(gpu_scenario(pool={"queuedProvisioning": True}, extra_pools=[cpu_pool]))
    cluster.create_pod_template("worker", gpu_pod_spec())
    cluster.create_request(
        "bad-duration", "worker", 1, "queued-provisioning.gke.io", parameters={"maxRunDurationSeconds": "forever"}
    )
    cluster.create_kueue("localqueues", "LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="default")
    cluster.batch.create_namespaced_job(
        "default",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "bad-min",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                "annotations": {"kueue.x-k8s.io/job-min-parallelism": "many"},
            },
            "spec": {"parallelism": 2, "template": {"spec": gpu_pod_spec()}},
        },
    )
    cluster.advance(20)
    reported = {event.involved_object.name: event.message for event in cluster.events("ReconcileError")}
    assert "maxRunDurationSeconds" in reported["bad-duration"]
    assert "bad-min" in reported
    # The control plane keeps working: an ordinary pod still runs.
    plain = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}
    cluster.core.create_namespaced_pod("default", pod("ok", spec=plain))
    cluster.advance(120)
    assert cluster.core.read_namespaced_pod("ok", "default").status.phase == "Running"

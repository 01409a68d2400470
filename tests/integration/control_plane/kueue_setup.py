"""Kueue set-up shared by the Kueue golden tests: queues, a Job in a LocalQueue, condition summaries."""

from __future__ import annotations

from typing import Any

from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import gpu_pod_spec

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK = "check-capacity.autoscaling.x-k8s.io"


def resource_groups(gpus: int) -> list[dict[str, Any]]:
    """A ClusterQueue's ``resourceGroups``: flavor ``l4`` with plenty of cpu/memory and ``gpus`` GPUs."""
    quotas = {"cpu": "100", "memory": "400Gi", "nvidia.com/gpu": str(gpus)}
    resources = [{"name": name, "nominalQuota": quota} for name, quota in quotas.items()]
    return [{"coveredResources": list(quotas), "flavors": [{"name": "l4", "resources": resources}]}]


def setup_queues(
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
            "resourceGroups": resource_groups(gpus),
            **strategy,
        },
    )
    cluster.create_kueue("localqueues", "LocalQueue", "lq", {"clusterQueue": "cq"}, namespace="default")


def create_job(
    cluster: SimCluster,
    name: str = "train",
    count: int = 4,
    run_seconds: int = 300,
    annotations: dict[str, str] | None = None,
    *,
    queue: str = "lq",
    template_annotations: dict[str, str] | None = None,
) -> Any:
    """An Indexed Job of ``count`` 1-GPU pods in LocalQueue ``queue``, its pods labelled ``gang: <name>``;
    ``annotations`` on the Job, ``template_annotations`` on its pod template."""
    return cluster.batch.create_namespaced_job(
        "default",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "labels": {"kueue.x-k8s.io/queue-name": queue},
                "annotations": annotations or {},
            },
            "spec": {
                "parallelism": count,
                "completions": count,
                "completionMode": "Indexed",
                "backoffLimit": 0,
                "template": {
                    "metadata": {
                        "labels": {"gang": name},
                        "annotations": {**(template_annotations or {}), "sim.gang.dev/run-seconds": str(run_seconds)},
                    },
                    "spec": gpu_pod_spec(),
                },
            },
        },
    )


def condition_map(workload: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (workload.get("status") or {}).get("conditions") or []}

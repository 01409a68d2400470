"""What one backend did with one topology-aware gang, as the plain values tests/real/test_topology.py
compares: a Kueue Job's Workload and pods, a PodGroup's outcome, what the autoscaler grew for a
ProvisioningRequest, a refused create. Each function creates its objects, waits for the outcome (a
deadline in real seconds) and deletes them again, so the next case starts from the scenario's state.

Hosts differ in name between backends (``rack-b1-1`` on kwok, ``gke-sim-rack-b1-pbvb`` on gang-sim),
so a host is named by its rack and the filler pods on it (:func:`hosts`: ``rack-b1/fill-b1-0``,
``rack-b1/-``).
"""

from __future__ import annotations

import itertools
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

import yaml

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.kueue import tas
from gang_sim.world.node_topology import BLOCK_LABEL, HOST_LABEL, SUBBLOCK_LABEL
from tests.real.backends import RealBackend, wait_for

POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"
WORKLOADS = "kueue.x-k8s.io/v1beta2/workloads"
REQUESTS = "autoscaling.x-k8s.io/v1/provisioningrequests"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
AWAY_FROM_RACK_B2 = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": SUBBLOCK_LABEL, "operator": "NotIn", "values": ["rack-b2"]}]}
            ]
        }
    }
}
"""A PodGroup's pods keep off the autoscaled rack: an unschedulable gang would otherwise make both
autoscalers grow rack-b2, at times that differ between the backends."""
POD_SPEC = {
    "restartPolicy": "Never",
    "tolerations": [GPU_TOLERATION],
    "containers": [
        {
            "name": "worker",
            "image": "registry.example/trainer:1.0",
            "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"},
            },
        }
    ],
}
SETTLE_SECONDS = 20.0
"""How long an outcome that binds nothing is watched for a change, in real seconds."""


@dataclass(frozen=True)
class Case:
    """One gang: ``kind`` is ``job`` (Kueue) or ``podgroup`` (Workload API)."""

    name: str
    kind: str
    size: int
    annotations: dict[str, str] = field(default_factory=dict)
    queue: str = "tas"
    job_annotations: dict[str, str] = field(default_factory=dict)
    topology_key: str = SUBBLOCK_LABEL


def delete(backend: Any, resource: str, name: str) -> None:
    if isinstance(backend, RealBackend):
        kind = {"v1/pods": "pod", "batch/v1/jobs": "job", POD_GROUPS: "podgroups.v1beta1.scheduling.k8s.io"}
        kind[REQUESTS] = "provisioningrequests.v1.autoscaling.x-k8s.io"
        kind["v1/podtemplates"] = "podtemplate"
        backend.cluster.kubectl(
            "delete",
            kind[resource],
            name,
            "-n",
            "default",
            "--cascade=background",
            "--wait=false",
            "--ignore-not-found",
        )
    else:
        backend.run(lambda: backend.store.delete(resource, name, "default", propagation_policy="Background"))


def hosts(backend: Any) -> dict[str, str]:
    """Node name -> ``<rack>/<filler pods on it>`` (the name both backends share for a host)."""
    fillers: dict[str, list[str]] = {}
    for pod in backend.objects("v1/pods", label_selector="app=filler"):
        if pod["spec"].get("nodeName"):
            fillers.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
    names = {}
    for node in backend.objects("v1/nodes", namespace=""):
        name = node["metadata"]["name"]
        rack = node["metadata"]["labels"].get(SUBBLOCK_LABEL, "-")
        names[name] = f"{rack}/{','.join(sorted(fillers.get(name, []))) or '-'}"
    return names


def gang_pods(backend: Any, name: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = backend.objects("v1/pods", label_selector=f"gang={name}")
    return pods


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((item for item in (obj.get("status") or {}).get("conditions") or [] if item["type"] == kind), None)


# -- Kueue Jobs ------------------------------------------------------------------------------------


def job(case: Case, name: str) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": case.queue}
    template = {"metadata": {"labels": {"gang": name}, "annotations": case.annotations}, "spec": POD_SPEC}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels, "annotations": case.job_annotations},
        "spec": {
            "parallelism": case.size,
            "completions": case.size,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": template,
        },
    }


def workload_of(backend: Any, name: str) -> dict[str, Any] | None:
    return next(
        (item for item in backend.objects(WORKLOADS) if item["metadata"]["name"].startswith(f"job-{name}-")), None
    )


def decided(backend: Any, name: str) -> dict[str, Any] | None:
    """The Job's Workload once it has a ``QuotaReserved`` condition."""
    found = workload_of(backend, name)
    return found if found is not None and condition(found, "QuotaReserved") is not None else None


def job_outcome(backend: Any, case: Case, name: str) -> dict[str, Any]:
    backend.create("batch/v1/jobs", job(case, name), "default")
    workload = wait_for(lambda: decided(backend, name), timeout=90, what=f"{name}'s Workload decided on")
    reserved = condition(workload, "QuotaReserved") or {}
    if reserved["status"] == "True":
        count = workload["status"]["admission"]["podSetAssignments"][0]["count"]
        wait_for(
            lambda: len([pod for pod in gang_pods(backend, name) if pod["spec"].get("nodeName")]) == count,
            timeout=120,
            what=f"{name}'s {count} pods bound",
        )
    else:
        time.sleep(SETTLE_SECONDS)
    workload = workload_of(backend, name) or workload
    reserved = condition(workload, "QuotaReserved") or {}
    names = hosts(backend)
    pods = gang_pods(backend, name)
    outcome: dict[str, Any] = {
        "QuotaReserved": (reserved["status"], reserved["message"]),
        "reason": reserved["reason"],
        "pods": len(pods),
        "gated": sorted({gate["name"] for pod in pods for gate in pod["spec"].get("schedulingGates") or []}),
    }
    admission = (workload.get("status") or {}).get("admission")
    if admission:
        (assignment,) = admission["podSetAssignments"]
        topology = assignment.get("topologyAssignment") or {"levels": []}
        outcome["count"] = assignment["count"]
        outcome["levels"] = topology["levels"]
        # Kueue lists the domains in the order of their values, hostnames here, and gives the completion
        # indexes out in that order; the backends name hosts differently, so which host comes first is
        # compared by the shared name instead (a host's run of consecutive indexes, each host once).
        outcome["assignment"] = sorted(
            (names.get(values[-1], values[-1]), count) for values, count in tas.domains_of(topology)
        )
        by_index = {int(pod["metadata"]["labels"][tas.JOB_INDEX_LABEL]): names[pod["spec"]["nodeName"]] for pod in pods}
        hosts_in_index_order = [by_index[index] for index in sorted(by_index)]
        outcome["index runs"] = sorted((host, len(list(run))) for host, run in itertools.groupby(hosts_in_index_order))
    delete(backend, "batch/v1/jobs", name)
    wait_for(
        lambda: not gang_pods(backend, name) and workload_of(backend, name) is None, timeout=120, what=f"{name} gone"
    )
    return outcome


# -- PodGroups -----------------------------------------------------------------------------------


def first_placement(message: str) -> str:
    """``message`` with the reported placement's counts masked: the real scheduler reports a
    placement drawn at random (a map's order), gang-sim the first in name order."""
    return re.sub(r"\d+ scheduled, \d+ remaining", "<s> scheduled, <r> remaining", message)


def podgroup_outcome(backend: Any, case: Case, name: str) -> dict[str, Any]:
    spec = {
        "schedulingPolicy": {"gang": {"minCount": case.size}},
        "schedulingConstraints": {"topology": [{"key": case.topology_key}]},
    }
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
    created = backend.create(POD_GROUPS, group, "default")
    for index in range(case.size):
        pod_spec = {**POD_SPEC, "schedulingGroup": {"podGroupName": name}, "affinity": AWAY_FROM_RACK_B2}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{index}", "labels": {"gang": name}},
            "spec": pod_spec,
        }
        backend.create("v1/pods", body, "default")
    found = wait_for(
        lambda: next(
            (
                item
                for item in backend.objects(POD_GROUPS)
                if item["metadata"]["name"] == name and condition(item, "PodGroupInitiallyScheduled")
            ),
            None,
        ),
        timeout=90,
        what=f"{name}'s first scheduling outcome",
    )
    scheduled = condition(found, "PodGroupInitiallyScheduled") or {}
    if scheduled["status"] == "True":
        wait_for(
            lambda: all(pod["spec"].get("nodeName") for pod in gang_pods(backend, name)),
            timeout=60,
            what=f"{name} bound",
        )
    else:
        time.sleep(SETTLE_SECONDS)
    names = hosts(backend)
    pods = gang_pods(backend, name)
    outcome = {
        "constraint kept": "schedulingConstraints" in created["spec"],
        "PodGroupInitiallyScheduled": (
            scheduled["status"],
            scheduled["reason"],
            first_placement(scheduled.get("message", "")),
        ),
        # racks, not hosts: within the rack each pod goes where the scheduler's node scores (and, on a
        # tie, its random pick) put it, which the topology does not decide
        "bound": sorted(names[pod["spec"]["nodeName"]].split("/")[0] for pod in pods if pod["spec"].get("nodeName")),
        "pods scheduled": sorted(
            {
                (item["status"], item.get("reason", ""))
                for pod in pods
                for item in (pod.get("status") or {}).get("conditions") or []
                if item["type"] == "PodScheduled"
            }
        ),
    }
    for pod in pods:
        delete(backend, "v1/pods", pod["metadata"]["name"])
    delete(backend, POD_GROUPS, name)
    wait_for(lambda: not gang_pods(backend, name), timeout=60, what=f"{name}'s pods gone")
    return outcome


def provisioned(backend: Any) -> dict[str, Any] | None:
    """The ProvisioningRequest once ``Provisioned=True``."""
    requests = backend.objects(REQUESTS)
    return requests[0] if requests and (condition(requests[0], "Provisioned") or {}).get("status") == "True" else None


def rack_b2_nodes(backend: Any) -> list[dict[str, Any]] | None:
    """rack-b2's nodes once both are there."""
    nodes: list[dict[str, Any]] = backend.objects("v1/nodes", namespace="", label_selector=f"{SUBBLOCK_LABEL}=rack-b2")
    return nodes if len(nodes) == 2 else None


def autoscaler_outcome(backend: Any) -> dict[str, Any]:
    """A best-effort-atomic request for six 1-GPU pods selecting rack-b2: what the autoscaler did."""
    spec = {**POD_SPEC, "nodeSelector": {SUBBLOCK_LABEL: "rack-b2"}}
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "rack-b2"}, "template": {"spec": spec}}
    pod_sets = [{"podTemplateRef": {"name": "rack-b2"}, "count": 6}]
    request = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "rack-b2"},
        "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io", "podSets": pod_sets},
    }
    backend.create("v1/podtemplates", template, "default")
    backend.create(REQUESTS, request, "default")
    granted = wait_for(lambda: provisioned(backend), timeout=180, what="the request provisioned")
    grown = wait_for(lambda: rack_b2_nodes(backend), timeout=180, what="rack-b2's two nodes")
    delete(backend, REQUESTS, "rack-b2")
    delete(backend, "v1/podtemplates", "rack-b2")
    return {
        "Provisioned": (condition(granted, "Provisioned") or {}).get("reason"),
        "nodes": len(grown),
        "blocks": sorted({node["metadata"]["labels"][BLOCK_LABEL] for node in grown}),
        "distinct hostnames": len({node["metadata"]["labels"]["kubernetes.io/hostname"] for node in grown}),
        "distinct topology hosts": len({node["metadata"]["labels"].get(HOST_LABEL) for node in grown}),
    }


def refusal(backend: Any, body: dict[str, Any]) -> str:
    """The message a create of ``body`` is refused with (``""``: accepted)."""
    if isinstance(backend, RealBackend):
        cluster = backend.cluster
        command = [
            str(cluster.binaries.path("kubectl")),
            "--kubeconfig",
            str(cluster.kubeconfig_path),
            "create",
            "-f",
            "-",
        ]
        answer = subprocess.run(
            command, input=yaml.safe_dump(body), capture_output=True, text=True, timeout=60, check=False
        )
        return answer.stderr.strip().removeprefix('Error from server (Forbidden): error when creating "STDIN": ')
    try:
        backend.create("batch/v1/jobs", body, "default")
    except ApiError as error:
        return f"{error.message}"
    return ""

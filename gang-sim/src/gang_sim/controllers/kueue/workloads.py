"""Kueue's Job and plain-Pod integrations, as pure functions (reference 2.5, 2.7, 2.8).

- :func:`mutate_on_create` is what Kueue's mutating webhooks do to a new Job (``spec.suspend=true``)
  or Pod (group member or single pod: label ``kueue.x-k8s.io/managed``, finalizer, gates
  ``kueue.x-k8s.io/admission`` and - TAS being on - ``kueue.x-k8s.io/topology``, the pod index label
  ``kueue.x-k8s.io/pod-group-pod-index`` copied from the label the annotation
  ``kueue.x-k8s.io/pod-group-pod-index-label`` names, annotation ``kueue.x-k8s.io/role-hash``) that
  carries the ``kueue.x-k8s.io/queue-name`` label (``pkg/controller/jobs/pod/pod_webhook.go``).
- :func:`workload_name` is ``jobframework.GetWorkloadNameForOwnerWithGVK``: ``<kind>-<name>-<sha1[:5]>``
  over ``kind \\n group \\n name \\n uid``.
- :func:`job_workload` / :func:`group_workload` / :func:`pod_workload` (a single plain pod) build the
  Workload objects; each podSet carries its ``topologyRequest`` (:func:`.tas.topology_request`, with
  the pod index label ``batch.kubernetes.io/job-completion-index`` for a Job,
  ``kueue.x-k8s.io/pod-group-pod-index`` for pods), as Kueue 0.17 writes it with TAS on.
- :func:`stands_for_pods`, :func:`pod_set_assignment` and :func:`assigned_flavor` read a Workload.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from gang_sim.controllers.kueue import tas

QUEUE_NAME = "kueue.x-k8s.io/queue-name"
JOB_UID = "kueue.x-k8s.io/job-uid"
MANAGED = "kueue.x-k8s.io/managed"
GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
IS_GROUP = "kueue.x-k8s.io/is-group-workload"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
POD_INDEX_LABEL_ANNOTATION = "kueue.x-k8s.io/pod-group-pod-index-label"
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"
PREBUILT_WORKLOAD = "kueue.x-k8s.io/prebuilt-workload-name"
"""A Job labelled so runs as the Workload it names instead of getting one (MultiKueue's copies)."""
PROVREQ_PREFIX = "provreq.kueue.x-k8s.io/"
WORKLOADS = "kueue.x-k8s.io/v1beta2/workloads"
RESOURCES = {
    "flavors": "kueue.x-k8s.io/v1beta2/resourceflavors",
    "cqs": "kueue.x-k8s.io/v1beta2/clusterqueues",
    "lqs": "kueue.x-k8s.io/v1beta2/localqueues",
    "acs": "kueue.x-k8s.io/v1beta2/admissionchecks",
    "prcs": "kueue.x-k8s.io/v1beta2/provisioningrequestconfigs",
}
MAX_PREFIX = 247


def workload_name(kind: str, group: str, name: str, uid: str) -> str:
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()[:5]
    prefix = f"{kind.lower()}-{name}"[:MAX_PREFIX]
    return f"{prefix}-{digest}"


def role_hash(spec: Mapping[str, Any]) -> str:
    """A stable short hash of the scheduling-relevant pod spec (pods sharing it form one podSet)."""
    relevant = {
        key: spec.get(key) for key in ("containers", "initContainers", "nodeSelector", "tolerations", "affinity")
    }
    relevant["containers"] = [
        {key: container.get(key) for key in ("name", "image", "resources")}
        for container in spec.get("containers") or []
    ]
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:8]


def mutate_on_create(resource: str, body: dict[str, Any]) -> None:
    """Kueue's mutating webhooks for Jobs and Pods with a queue-name label (in place)."""
    metadata = body.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if not labels.get(QUEUE_NAME):
        return
    if resource == "batch/v1/jobs":
        body.setdefault("spec", {})["suspend"] = True
    elif resource == "v1/pods" and not any(ref.get("controller") for ref in metadata.get("ownerReferences") or []):
        # Pods with a controller (a Job's pods) are managed through their owner, not the pod integration.
        labels[MANAGED] = "true"
        metadata["labels"] = labels
        finalizers = metadata.setdefault("finalizers", [])
        if MANAGED not in finalizers:
            finalizers.append(MANAGED)
        spec = body.setdefault("spec", {})
        gates = spec.setdefault("schedulingGates", [])
        for gate_name in (ADMISSION_GATE, tas.TOPOLOGY_GATE):
            if not any(gate.get("name") == gate_name for gate in gates):
                gates.append({"name": gate_name})
        index_label = (metadata.get("annotations") or {}).get(POD_INDEX_LABEL_ANNOTATION)
        if index_label is not None:
            labels[tas.GROUP_INDEX_LABEL] = labels.get(index_label, "")
        metadata.setdefault("annotations", {})[ROLE_HASH] = role_hash(spec)
        body["metadata"] = metadata


def _pod_set(
    name: str, count: int, template: Mapping[str, Any], index_label: str, min_count: int | None = None
) -> dict[str, Any]:
    """A podSet of ``count`` pods like ``template``; its ``topologyRequest`` from the template's
    annotations, ranks read from ``index_label``."""
    template_metadata = template.get("metadata") or {}
    pod_set: dict[str, Any] = {
        "name": name,
        "count": count,
        "template": {
            "metadata": {
                key: value for key, value in template_metadata.items() if key in ("labels", "annotations") and value
            },
            "spec": copy.deepcopy(template.get("spec") or {}),
        },
    }
    if min_count is not None:
        pod_set["minCount"] = min_count
    pod_set["topologyRequest"] = tas.topology_request(template_metadata.get("annotations") or {}, index_label)
    return pod_set


def job_pod_count(job: Mapping[str, Any]) -> int:
    spec = job.get("spec") or {}
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, int(completions))


def job_workload(job: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload Kueue creates for a Job (one podSet ``main``)."""
    metadata = job["metadata"]
    annotations = metadata.get("annotations") or {}
    min_count = None
    if MIN_PARALLELISM in annotations:
        min_count = int(annotations[MIN_PARALLELISM])
        if not 0 < min_count < job_pod_count(job):
            raise ValueError(f"annotation {MIN_PARALLELISM} must be between 0 and the pod count (exclusive)")
    provreq = {key: value for key, value in annotations.items() if key.startswith(PROVREQ_PREFIX)}
    owner_annotations = {
        "kueue.x-k8s.io/job-owner-gvk": "batch/v1, Kind=Job",
        "kueue.x-k8s.io/job-owner-name": metadata["name"],
    }
    template = (job.get("spec") or {}).get("template") or {}
    pod_set = _pod_set("main", job_pod_count(job), template, tas.JOB_INDEX_LABEL, min_count)
    return _owned_workload(
        ("batch/v1", "Job"),
        job,
        workload_name("Job", "batch", metadata["name"], metadata["uid"]),
        [pod_set],
        annotations={**owner_annotations, **provreq},
    )


def pod_workload(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload of a single plain pod (no group label): ``pod-<name>-<hash>``, owned by the pod."""
    metadata = pod["metadata"]
    spec = copy.deepcopy(pod.get("spec") or {})
    spec.pop("schedulingGates", None)
    spec.pop("nodeName", None)
    name = workload_name("Pod", "", metadata["name"], metadata["uid"])
    template = {"metadata": {"annotations": _tas_annotations(metadata)}, "spec": spec}
    return _owned_workload(("v1", "Pod"), pod, name, [_pod_set("main", 1, template, tas.GROUP_INDEX_LABEL)])


def _tas_annotations(metadata: Mapping[str, Any]) -> dict[str, str]:
    """A pod's TAS annotations: what its podSet's ``topologyRequest`` is read from."""
    annotations = metadata.get("annotations") or {}
    return {key: value for key, value in annotations.items() if key in tas.TAS_ANNOTATIONS}


def _owned_workload(
    owner_type: tuple[str, str],
    owner: Mapping[str, Any],
    name: str,
    pod_sets: list[dict[str, Any]],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Workload controlled by ``owner`` (a Job or a single pod; ``owner_type`` = (apiVersion, kind)),
    labelled with its uid and queued in the owner's ``queue-name``."""
    metadata = owner["metadata"]
    api_version, kind = owner_type
    workload_metadata: dict[str, Any] = {
        "name": name,
        "namespace": metadata["namespace"],
        "labels": {JOB_UID: metadata["uid"]},
    }
    if annotations is not None:
        workload_metadata["annotations"] = annotations
    workload_metadata["ownerReferences"] = [
        {
            "apiVersion": api_version,
            "kind": kind,
            "name": metadata["name"],
            "uid": metadata["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": workload_metadata,
        "spec": {"active": True, "queueName": (metadata.get("labels") or {})[QUEUE_NAME], "podSets": pod_sets},
    }


def group_workload(group: str, namespace: str, pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The Workload of a plain pod group: named after the group, one podSet per role hash."""
    roles: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        roles.setdefault(
            ((pod["metadata"].get("annotations") or {}).get(ROLE_HASH) or role_hash(pod["spec"])), []
        ).append(pod)
    first = pods[0]["metadata"]
    pod_sets = [
        _pod_set(
            role,
            len(members),
            {"metadata": {"annotations": _tas_annotations(members[0]["metadata"])}, "spec": members[0]["spec"]},
            tas.GROUP_INDEX_LABEL,
        )
        for role, members in sorted(roles.items())
    ]
    for pod_set in pod_sets:
        pod_set["template"]["spec"].pop("schedulingGates", None)
        pod_set["template"]["spec"].pop("nodeName", None)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": group,
            "namespace": namespace,
            "annotations": {IS_GROUP: "true"},
            "labels": {},
        },
        "spec": {"active": True, "queueName": (first.get("labels") or {})[QUEUE_NAME], "podSets": pod_sets},
    }


def stands_for_pods(workload: Mapping[str, Any]) -> bool:
    """A Workload of plain pods (a group, or a single pod) rather than of a Job."""
    annotations = workload["metadata"].get("annotations") or {}
    owners = workload["metadata"].get("ownerReferences") or []
    return annotations.get(IS_GROUP) == "true" or any(ref.get("kind") == "Pod" for ref in owners)


def pod_set_assignment(workload: Mapping[str, Any], pod_set: str) -> dict[str, Any]:
    """The ``status.admission.podSetAssignments`` entry of ``pod_set`` (a copy; empty when none)."""
    for item in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        if item["name"] == pod_set:
            return dict(item)
    return {}


def assigned_flavor(assignment: Mapping[str, Any], flavors: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The ResourceFlavor of an assignment (the first by name when resources got different ones)."""
    names = set((assignment.get("flavors") or {}).values())
    return flavors.get(sorted(names)[0]) if names else None

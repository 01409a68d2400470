"""What Kueue does to the objects a Workload stands for: Jobs and plain pod groups (reference 2.7, 2.8). Pure.

As kubernetes-sigs/kueue's job reconciler (``pkg/controller/jobframework/reconciler.go``) with the Job
(``pkg/controller/jobs/job``) and Pod (``pkg/controller/jobs/pod``) integrations, on the owner's state
read by the manager (:class:`~.snapshot.Owner`): :func:`finished` and :func:`ready_pods` report on it,
:func:`start` and :func:`stop` return the patches (:mod:`.patches`) that run or stop it:

- start a Job: its template gets the flavor's node labels and tolerations and :func:`pod_set_info`
  (the checks' ``podSetUpdates``, the podSet label and Workload annotation, the topology gate of a
  Topology Aware Scheduling admission); partial admission sets ``parallelism`` (and ``completions`` too
  when the Job is annotated ``kueue.x-k8s.io/job-completions-equal-parallelism: "true"``); then
  ``suspend=false``;
- start a pod group: the same merged into each pod, then the ``kueue.x-k8s.io/admission`` gate
  removed (and ``kueue.x-k8s.io/topology`` too, unless the admission has a topology assignment);
- stop a Job: ``suspend=true``, template, parallelism (and completions) restored, ``status.startTime``
  cleared; stop a pod group: its pods are deleted.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from gang_sim.controllers.base import Obj, is_true
from gang_sim.controllers.kueue import tas
from gang_sim.controllers.kueue import workloads as wl
from gang_sim.controllers.kueue.patches import DeleteObject, Patch, PatchObject
from gang_sim.controllers.kueue.snapshot import Owner

LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def merge_pod_spec(spec: dict[str, Any], flavor: Obj | None, update: Obj | None) -> dict[str, Any]:
    merged = copy.deepcopy(spec)
    selector = dict(merged.get("nodeSelector") or {})
    tolerations = list(merged.get("tolerations") or [])
    if flavor is not None:
        selector.update((flavor.get("spec") or {}).get("nodeLabels") or {})
        tolerations += [item for item in (flavor.get("spec") or {}).get("tolerations") or [] if item not in tolerations]
    if update is not None:
        selector.update(update.get("nodeSelector") or {})
        tolerations += [item for item in update.get("tolerations") or [] if item not in tolerations]
    if selector:
        merged["nodeSelector"] = selector
    if tolerations:
        merged["tolerations"] = tolerations
    return merged


def finished(workload: Obj, owner: Owner) -> tuple[str, str] | None:
    """``(reason, message)`` of ``Finished=True`` once the owner is done, else None.

    A pod group finishes when ``count`` pods Succeeded; a single pod also when it Failed; a Job when
    it is ``Complete`` or ``Failed``.
    """
    if wl.stands_for_pods(workload):
        total = sum(int(item.get("count", 1)) for item in workload["spec"]["podSets"])
        phases = [(pod.get("status") or {}).get("phase") for pod in owner.pods]
        if phases.count("Succeeded") >= total:
            return ("Succeeded", "Pods succeeded")
        single = (workload["metadata"].get("annotations") or {}).get(wl.IS_GROUP) != "true"
        return ("Failed", "Pod failed") if single and "Failed" in phases else None
    job = owner.job
    if job is None:
        return None
    if is_true(job, "Complete"):
        return ("Succeeded", "Job finished successfully")
    if is_true(job, "Failed"):
        return ("Failed", "Job failed")
    return None


def ready_pods(workload: Obj, owner: Owner) -> tuple[int, int]:
    """``(ready or succeeded pods, admitted pod count)``."""
    total = sum(
        int(item.get("count", 1))
        for item in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    )
    if wl.stands_for_pods(workload):
        ready = sum(
            1 for pod in owner.pods if is_true(pod, "Ready") or (pod.get("status") or {}).get("phase") == "Succeeded"
        )
        return ready, total
    status = (owner.job or {}).get("status") or {}
    return int(status.get("ready", 0)) + int(status.get("succeeded", 0)), total


def _pod_set_update(workload: Obj, pod_set: str) -> Obj:
    """The admission checks' ``podSetUpdates`` of ``pod_set``, merged (``annotations`` always present)."""
    annotations: dict[str, str] = {}
    merged: dict[str, Any] = {}
    for entry in (workload.get("status") or {}).get("admissionChecks") or []:
        for update in entry.get("podSetUpdates") or []:
            if update.get("name") == pod_set:
                annotations.update(update.get("annotations") or {})
                merged.setdefault("nodeSelector", {}).update(update.get("nodeSelector") or {})
                merged.setdefault("tolerations", []).extend(update.get("tolerations") or [])
                merged.setdefault("labels", {}).update(update.get("labels") or {})
    merged["annotations"] = annotations
    return merged


def pod_set_info(workload: Obj, pod_set: Obj) -> Obj:
    """What starting puts on a podSet's pods (``getPodSetsInfoFromStatus``): the admission checks'
    ``podSetUpdates`` (:func:`_pod_set_update`), the labels ``kueue.x-k8s.io/podset`` and the queues'
    (:func:`_queue_labels`), the annotation
    ``kueue.x-k8s.io/workload``; with a topology assignment the gate ``kueue.x-k8s.io/topology``
    (``topology: True``) and, for a podSet that did not ask for TAS (implied by a TAS-only
    ClusterQueue), ``kueue.x-k8s.io/podset-unconstrained-topology: "true"`` (``podset.FromAssignment``)."""
    name = pod_set["name"]
    info = _pod_set_update(workload, name)
    info["labels"] = {**(info.get("labels") or {}), tas.PODSET_LABEL: name, **_queue_labels(workload)}
    info["annotations"] = {**info["annotations"], tas.WORKLOAD_ANNOTATION: workload["metadata"]["name"]}
    info["topology"] = bool(wl.pod_set_assignment(workload, name).get("topologyAssignment"))
    if info["topology"] and not tas.is_explicit(pod_set):
        info["annotations"][tas.UNCONSTRAINED] = "true"
    return info


def _queue_labels(workload: Obj) -> dict[str, str]:
    """``kueue.x-k8s.io/local-queue-name`` and ``cluster-queue-name`` (``AssignQueueLabelsForPods``,
    beta and on in Kueue 0.17: ``assignQueueLabels``; the ClusterQueue's only when it is a DNS-1123 label)."""
    labels = {LOCAL_QUEUE_LABEL: str((workload.get("spec") or {}).get("queueName", ""))}
    cluster_queue = str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue", ""))
    if _DNS_LABEL.fullmatch(cluster_queue):
        labels[CLUSTER_QUEUE_LABEL] = cluster_queue
    return labels


def _pod_set_of(workload: Obj, pod: Obj) -> Obj:
    """The podSet a plain pod belongs to: the one named by its role hash, else the first."""
    role = ((pod.get("metadata") or {}).get("annotations") or {}).get(wl.ROLE_HASH)
    pod_sets = workload["spec"]["podSets"]
    return next((item for item in pod_sets if item["name"] == role), pod_sets[0])


def _start_pod(workload: Obj, pod: Obj, flavors: Mapping[str, Obj]) -> PatchObject | None:
    """Ungate one admitted pod of a group (``prepare`` in ``pkg/controller/jobs/pod/pod_controller.go``):
    the podSet's info merged in, the admission gate removed, the topology gate too unless the podSet
    has a topology assignment (the TopologyUngater removes it then)."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    if not any(gate.get("name") == wl.ADMISSION_GATE for gate in gates):
        return None
    pod_set = _pod_set_of(workload, pod)
    info = pod_set_info(workload, pod_set)
    removed = {wl.ADMISSION_GATE} if info["topology"] else {wl.ADMISSION_GATE, tas.TOPOLOGY_GATE}
    flavor = wl.assigned_flavor(wl.pod_set_assignment(workload, pod_set["name"]), flavors)
    spec = merge_pod_spec(pod["spec"], flavor, info)
    patch: dict[str, Any] = {
        "metadata": {"annotations": info["annotations"], "labels": info["labels"]},
        "spec": {
            "schedulingGates": [gate for gate in gates if gate.get("name") not in removed],
            **{key: spec[key] for key in ("nodeSelector", "tolerations") if key in spec},
        },
    }
    metadata = pod["metadata"]
    return PatchObject("v1/pods", metadata["name"], patch, namespace=metadata["namespace"])


def start(workload: Obj, owner: Owner, flavors: Mapping[str, Obj]) -> list[Patch]:
    """Run the admitted owner; nothing for pods already ungated or a Job already unsuspended."""
    if wl.stands_for_pods(workload):
        return [patch for pod in owner.pods if (patch := _start_pod(workload, pod, flavors)) is not None]
    pod_set = workload["spec"]["podSets"][0]
    assignment = wl.pod_set_assignment(workload, pod_set["name"])
    flavor = wl.assigned_flavor(assignment, flavors)
    info = pod_set_info(workload, pod_set)
    job = owner.job
    if job is None or not (job.get("spec") or {}).get("suspend"):
        return []
    template = copy.deepcopy(pod_set.get("template") or {})
    template.setdefault("metadata", {}).setdefault("annotations", {}).update(info["annotations"])
    template["metadata"].setdefault("labels", {}).update(info["labels"])
    template["spec"] = merge_pod_spec(template.get("spec") or {}, flavor, info)
    if info["topology"]:
        gates = template["spec"].setdefault("schedulingGates", [])
        if not any(gate.get("name") == tas.TOPOLOGY_GATE for gate in gates):
            gates.append({"name": tas.TOPOLOGY_GATE})
    template["metadata"]["labels"].update(
        ((job["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
    )
    spec_patch: dict[str, Any] = {"suspend": False, "template": template}
    count = int(assignment.get("count", pod_set.get("count", 1)))
    if count != int(pod_set.get("count", 1)):
        spec_patch["parallelism"] = count
        if _completions_follow_parallelism(job):
            spec_patch["completions"] = count
    metadata = job["metadata"]
    return [PatchObject("batch/v1/jobs", metadata["name"], {"spec": spec_patch}, namespace=metadata["namespace"])]


def stop(workload: Obj, owner: Owner) -> list[Patch]:
    """Stop an evicted owner: suspend the Job (restoring its template) or delete the group's pods."""
    if wl.stands_for_pods(workload):
        return [DeleteObject("v1/pods", pod["metadata"]["name"], pod["metadata"]["namespace"]) for pod in owner.pods]
    job = owner.job
    if job is None:
        return []
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    pod_set = workload["spec"]["podSets"][0]
    template = copy.deepcopy(pod_set.get("template") or {})
    template.setdefault("metadata", {}).setdefault("labels", {}).update(
        ((job["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
    )
    restored: dict[str, Any] = {"template": template, "parallelism": int(pod_set.get("count", 1))}
    if _completions_follow_parallelism(job):
        restored["completions"] = restored["parallelism"]
    return [
        PatchObject("batch/v1/jobs", name, {"spec": {"suspend": True}}, namespace=namespace),
        PatchObject("batch/v1/jobs", name, {"spec": restored}, namespace=namespace),
        PatchObject("batch/v1/jobs", name, {"status": {"startTime": None}}, namespace=namespace, subresource="status"),
    ]


def _completions_follow_parallelism(job: Obj) -> bool:
    """``kueue.x-k8s.io/job-completions-equal-parallelism: "true"``: partial admission lowers completions too."""
    annotations = job["metadata"].get("annotations") or {}
    return annotations.get(wl.COMPLETIONS_EQUAL_PARALLELISM) == "true"

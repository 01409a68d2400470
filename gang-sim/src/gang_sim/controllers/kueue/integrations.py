"""Kueue's Job and plain-Pod integrations: Workloads for new owners, pod finalizers. Pure.

As kubernetes-sigs/kueue ``pkg/controller/jobframework/reconciler.go`` (a Workload per queued Job,
Event ``CreatedWorkload``) and ``pkg/controller/jobs/pod/pod_controller.go`` (a pod group gets its
Workload once ``kueue.x-k8s.io/pod-group-total-count`` runnable pods exist, each member then owned by
it; until then Event "'<group>' group has fewer runnable pods than expected", once per count; a
single plain pod gets its own Workload), on an :class:`~.snapshot.IntegrationSnapshot`. A Job labelled
``kueue.x-k8s.io/prebuilt-workload-name`` (MultiKueue's copy on a worker) gets no Workload: it takes
over the one it names (``jobframework.EnsurePrebuiltWorkloadOwnership``).

:func:`finalizer_releases` drops ``kueue.x-k8s.io/managed`` from pods being deleted, or terminal once
their group finished. Both return one :class:`~.patches.Batch` per object.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial

from gang_sim.controllers.base import Obj, controlled_by, is_true, owner_reference
from gang_sim.controllers.kueue import workloads as wl
from gang_sim.controllers.kueue.patches import Batch, CreateObject, Patch, PatchObject, RecordEvent
from gang_sim.controllers.kueue.snapshot import IntegrationSnapshot

TERMINAL = ("Succeeded", "Failed")


def workload_creations(snapshot: IntegrationSnapshot) -> list[Batch]:
    """Workloads to create: for queued Jobs, then complete pod groups, then single plain pods."""
    by_job_uid = {(item["metadata"].get("labels") or {}).get(wl.JOB_UID) for item in snapshot.workloads}
    by_name = {(item["metadata"]["namespace"], item["metadata"]["name"]) for item in snapshot.workloads}
    batches: list[Batch] = []
    workloads = {(item["metadata"]["namespace"], item["metadata"]["name"]): item for item in snapshot.workloads}
    for job in snapshot.jobs:
        labels = job["metadata"].get("labels") or {}
        prebuilt = labels.get(wl.PREBUILT_WORKLOAD)
        if prebuilt:
            named = workloads.get((job["metadata"]["namespace"], prebuilt))
            if named is not None and not controlled_by(named, job):
                batches.append(Batch(named, partial(_adopt_prebuilt, named, job)))
            continue
        if not labels.get(wl.QUEUE_NAME) or job["metadata"]["uid"] in by_job_uid:
            continue
        if is_true(job, "Complete") or is_true(job, "Failed"):
            continue
        batches.append(Batch(job, partial(_job_workload, job)))
    groups: dict[tuple[str, str], list[Obj]] = {}
    for pod in snapshot.pods:
        labels = pod["metadata"].get("labels") or {}
        if labels.get(wl.QUEUE_NAME) and labels.get(wl.GROUP_NAME) and not pod["metadata"].get("deletionTimestamp"):
            groups.setdefault((pod["metadata"]["namespace"], labels[wl.GROUP_NAME]), []).append(pod)
    for (namespace, group), pods in groups.items():
        if (namespace, group) not in by_name:
            batches.append(Batch(pods[0], partial(_group_workload, namespace, group, pods)))
    for pod in snapshot.pods:
        metadata = pod["metadata"]
        labels = metadata.get("labels") or {}
        if not labels.get(wl.QUEUE_NAME) or labels.get(wl.GROUP_NAME) or metadata["uid"] in by_job_uid:
            continue
        if metadata.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        batches.append(Batch(pod, partial(_pod_workload, pod)))
    return batches


def _adopt_prebuilt(workload: Obj, job: Obj) -> list[Patch]:
    """A prebuilt Workload taken over by the Job naming it: a controller reference to the Job and the
    Job's uid as ``kueue.x-k8s.io/job-uid`` (``jobframework.EnsurePrebuiltWorkloadOwnership``)."""
    metadata = workload["metadata"]
    body = {
        "metadata": {
            "ownerReferences": [owner_reference(job)],
            "labels": {**(metadata.get("labels") or {}), wl.JOB_UID: job["metadata"]["uid"]},
        }
    }
    return [PatchObject(wl.WORKLOADS, metadata["name"], body, namespace=metadata["namespace"])]


def _job_workload(job: Obj) -> list[Patch]:
    namespace = job["metadata"]["namespace"]
    workload = wl.job_workload(job)
    created = RecordEvent("CreatedWorkload", f"Created Workload: {namespace}/{workload['metadata']['name']}")
    return [CreateObject(wl.WORKLOADS, namespace, workload), created]


def _group_workload(namespace: str, group: str, pods: Sequence[Obj]) -> list[Patch]:
    total = int((pods[0]["metadata"].get("annotations") or {}).get(wl.GROUP_TOTAL, "1"))
    runnable = [pod for pod in pods if (pod.get("status") or {}).get("phase") not in TERMINAL]
    if len(runnable) < total:
        message = f"'{group}' group has fewer runnable pods than expected"
        once = (namespace, group, str(len(runnable)))
        return [RecordEvent("ErrWorkloadCompose", message, warning=True, once_key=once)]
    members = sorted(runnable, key=lambda pod: pod["metadata"]["name"])[:total]
    workload = wl.group_workload(group, namespace, members)
    return [CreateObject(wl.WORKLOADS, namespace, workload, adopters=tuple(members))]


def _pod_workload(pod: Obj) -> list[Patch]:
    return [CreateObject(wl.WORKLOADS, pod["metadata"]["namespace"], wl.pod_workload(pod))]


def finished_groups(workloads: Iterable[Obj]) -> set[tuple[str, str]]:
    """``(namespace, name)`` of the pod-group Workloads that finished."""
    return {
        (item["metadata"]["namespace"], item["metadata"]["name"])
        for item in workloads
        if is_true(item, "Finished") and (item["metadata"].get("annotations") or {}).get(wl.IS_GROUP) == "true"
    }


def finalizer_releases(pods: Iterable[Obj], finished: set[tuple[str, str]]) -> list[Batch]:
    """Drop ``kueue.x-k8s.io/managed`` from pods being deleted, or terminal with their group ``finished``
    (a pod of no group: once terminal). The patch is conditional on the pod's resourceVersion."""
    batches: list[Batch] = []
    for pod in pods:
        metadata = pod["metadata"]
        finalizers = metadata.get("finalizers") or []
        if wl.MANAGED not in finalizers:
            continue
        group_name = (metadata.get("labels") or {}).get(wl.GROUP_NAME)
        terminal = (pod.get("status") or {}).get("phase") in TERMINAL
        group_finished = group_name is None or (metadata["namespace"], group_name) in finished
        if metadata.get("deletionTimestamp") or (terminal and group_finished):
            batches.append(Batch(pod, partial(_release_finalizer, pod)))
    return batches


def _release_finalizer(pod: Obj) -> list[Patch]:
    metadata = pod["metadata"]
    remaining = [name for name in metadata.get("finalizers") or [] if name != wl.MANAGED]
    patch = {"metadata": {"finalizers": remaining or None, "resourceVersion": metadata["resourceVersion"]}}
    return [PatchObject("v1/pods", metadata["name"], patch, namespace=metadata["namespace"])]

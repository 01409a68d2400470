"""Kueue's MultiKueue on the manager cluster, as pure decisions over one Workload and its remote copies.

Follows kubernetes-sigs/kueue v0.17.0 ``pkg/controller/admissionchecks/multikueue/workload.go``
(``reconcileGroup``), ``admissioncheck.go`` (the check's ``Active``) and
``pkg/controller/jobs/job/job_multikueue_adapter.go`` (the Job copied to the worker), with the
defaults of that release: the all-at-once dispatcher and ``MultiKueueWaitForWorkloadAdmitted`` (a
worker counts once its own Kueue *admitted* the copy). For a Workload holding quota on the manager
whose MultiKueue check is not ``Rejected`` (:func:`reconcile_group`, first rule that applies)::

    finished, or no quota reserved          -> delete every remote copy (the Job first, then the Workload)
    a remote copy Finished                  -> the worker Job's status onto the manager's Job, Finished
                                               (reason and message of the worker's) on the manager
    a remote copy Evicted, check Ready      -> check Retry: "Workload evicted on worker cluster ..."
    a remote copy Admitted (the earliest)   -> delete the others; create the worker's Job if missing
                                               (and wait for it), else mirror its status onto the
                                               manager's Job (once the manager's is unsuspended) and
                                               mark the check Ready "The workload got reservation on
                                               <cluster>", status.clusterName
    check Ready but no copy admitted        -> check Retry "Reserving remote lost" after the worker-lost
                                               timeout (15 minutes by default)
    otherwise                               -> a copy of the Workload on every active worker lacking one

A remote copy is the Workload's metadata (name, namespace, labels, annotations) and spec, labelled
``kueue.x-k8s.io/multikueue-origin``; the worker's Job is the manager's with its selector, the Job
controller's pod-template labels (but ``batch.kubernetes.io/job-name``) and ``spec.managedBy`` left
out, labelled with the origin and ``kueue.x-k8s.io/prebuilt-workload-name`` (the worker's Kueue
adopts the copied Workload instead of making one). Remote copies whose manager Workload is gone are
deleted (:func:`orphans`: the deleted-workload path and the periodic garbage collection upstream).

Not modelled: elastic Workloads, the incremental and external dispatchers, orchestrated preemption,
priority changes propagated to the copies, the eviction-on-manager round trip, ClusterProfiles.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from gang_sim.controllers.base import Obj, condition, is_true
from gang_sim.controllers.kueue.workloads import PREBUILT_WORKLOAD as PREBUILT_WORKLOAD_LABEL

CONTROLLER = "kueue.x-k8s.io/multikueue"
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
DEFAULT_ORIGIN = "multikueue"
DEFAULT_WORKER_LOST_TIMEOUT_SECONDS = 15 * 60.0
JOB_CONTROLLER_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name")
"""Pod-template labels the Job controller sets that the copy leaves out (``cleanLabels``)."""
WORKLOADS = "kueue.x-k8s.io/v1beta2/workloads"
JOBS = "batch/v1/jobs"


@dataclass(frozen=True)
class Remote:
    """What one worker holds of a Workload: its copy of the Workload and of the Job (``None``: none)."""

    workload: Obj | None = None
    job: Obj | None = None


@dataclass(frozen=True)
class Group:
    """One manager Workload with its MultiKueue check and what every active worker of the check's
    MultiKueueConfig holds of it (``remotes``, by MultiKueueCluster name)."""

    local: Obj
    local_job: Obj | None
    check: str
    remotes: Mapping[str, Remote]
    origin: str
    wall_clock: datetime
    worker_lost_timeout: float = DEFAULT_WORKER_LOST_TIMEOUT_SECONDS


@dataclass(frozen=True)
class RemoteCreate:
    """Create ``body`` (of store key ``resource``) on worker ``cluster``."""

    cluster: str
    resource: str
    body: Obj


@dataclass(frozen=True)
class RemoteDelete:
    """Delete ``namespace/name`` of ``resource`` on worker ``cluster`` (background propagation)."""

    cluster: str
    resource: str
    namespace: str
    name: str


@dataclass(frozen=True)
class CheckState:
    """Set the MultiKueue check of the manager Workload to ``state`` with ``message``;
    ``cluster_name``: also set ``status.clusterName`` (and clear ``nominatedClusterNames``)."""

    state: str
    message: str
    cluster_name: str | None = None


@dataclass(frozen=True)
class MirrorJobStatus:
    """Overwrite the manager Job's ``status`` with the worker Job's."""

    status: Obj


@dataclass(frozen=True)
class Finish:
    """``Finished=True`` on the manager Workload, with the worker's reason and message."""

    reason: str
    message: str


Action = RemoteCreate | RemoteDelete | CheckState | MirrorJobStatus | Finish


def check_entry(workload: Obj, check: str) -> Obj | None:
    """The Workload's ``status.admissionChecks`` entry of ``check``."""
    for entry in (workload.get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") == check:
            return dict(entry)
    return None


def remove(cluster: str, remote: Remote) -> list[Action]:
    """Delete a worker's copies: the Job first (upstream ``RemoveRemoteObjects``), then the Workload."""
    actions: list[Action] = []
    for resource, obj in ((JOBS, remote.job), (WORKLOADS, remote.workload)):
        if obj is not None:
            metadata = obj["metadata"]
            actions.append(RemoteDelete(cluster, resource, metadata["namespace"], metadata["name"]))
    return actions


def _since(entry: Obj, wall_clock: datetime) -> float:
    stamp = entry.get("lastTransitionTime")
    if not isinstance(stamp, str):
        return 0.0
    try:
        moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=wall_clock.tzinfo)
    except ValueError:
        return 0.0
    return (wall_clock - moment).total_seconds()


def _first_with(group: Group, condition_type: str) -> str | None:
    """The worker whose copy has ``condition_type`` True the longest (upstream ``bestMatchByCondition``)."""
    found: list[tuple[str, str]] = []
    for cluster, remote in group.remotes.items():
        if remote.workload is not None and is_true(remote.workload, condition_type):
            since = (condition(remote.workload, condition_type) or {}).get("lastTransitionTime", "")
            found.append((str(since), cluster))
    return min(found)[1] if found else None


def reconcile_group(group: Group) -> list[Action]:
    """What MultiKueue does for ``group`` now (the rules of the module docstring, in order)."""
    entry = check_entry(group.local, group.check)
    if entry is None or entry.get("state") == "Rejected":
        return []
    local = group.local
    if is_true(local, "Finished") or not is_true(local, "QuotaReserved"):
        return [action for cluster, remote in group.remotes.items() for action in remove(cluster, remote)]
    finished = _first_with(group, "Finished")
    if finished is not None:
        remote = group.remotes[finished]
        done = condition(remote.workload or {}, "Finished") or {}
        mirrored = [] if remote.job is None else [MirrorJobStatus(dict(remote.job.get("status") or {}))]
        return [*mirrored, Finish(str(done.get("reason", "")), str(done.get("message", "")))]
    evicted = _first_with(group, "Evicted")
    if evicted is not None and entry.get("state") == "Ready":
        message = f'Workload evicted on worker cluster: "{evicted}", resetting for re-admission. Previously: "Ready"'
        return [CheckState("Retry", message)]
    admitted = _first_with(group, "Admitted")
    if admitted is not None:
        return _reserving(group, admitted, entry)
    if entry.get("state") == "Ready":
        if _since(entry, group.wall_clock) >= group.worker_lost_timeout:
            return [CheckState("Retry", "Reserving remote lost")]
        return []
    return [
        RemoteCreate(cluster, WORKLOADS, clone_workload(local, group.origin))
        for cluster, remote in sorted(group.remotes.items())
        if remote.workload is None
    ]


def _reserving(group: Group, reserving: str, entry: Obj) -> list[Action]:
    """A worker admitted the copy: keep it alone, run the Job there, mark the check Ready."""
    actions: list[Action] = [
        action
        for cluster, remote in sorted(group.remotes.items())
        if cluster != reserving
        for action in remove(cluster, remote)
    ]
    remote, local_job = group.remotes[reserving], group.local_job
    if local_job is not None and remote.job is None:  # the check turns Ready only once the Job is there
        body = clone_job(local_job, str(group.local["metadata"]["name"]), group.origin)
        return [*actions, RemoteCreate(reserving, JOBS, body)]
    if local_job is not None and remote.job is not None and not (local_job.get("spec") or {}).get("suspend"):
        actions.append(MirrorJobStatus(dict(remote.job.get("status") or {})))
    message = f'The workload got reservation on "{reserving}"'
    if entry.get("state") not in ("Retry", "Rejected") and (
        entry.get("state") != "Ready" or (group.local.get("status") or {}).get("clusterName") != reserving
    ):
        actions.append(CheckState("Ready", message, cluster_name=reserving))
    return actions


def clone_workload(local: Obj, origin: str) -> Obj:
    """The copy of a manager Workload made on a worker (upstream ``cloneForCreate``)."""
    metadata = local["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "labels": {**(metadata.get("labels") or {}), ORIGIN_LABEL: origin},
            "annotations": dict(metadata.get("annotations") or {}),
        },
        "spec": copy.deepcopy(local.get("spec") or {}),
    }


def clone_job(job: Obj, workload_name: str, origin: str) -> Obj:
    """The worker's copy of a manager Job (upstream ``multiKueueAdapter.SyncJob``)."""
    metadata = job["metadata"]
    spec = copy.deepcopy(job.get("spec") or {})
    spec.pop("selector", None)
    spec.pop("managedBy", None)
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        for key in JOB_CONTROLLER_LABELS:
            labels.pop(key, None)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "labels": {
                **(metadata.get("labels") or {}),
                PREBUILT_WORKLOAD_LABEL: workload_name,
                ORIGIN_LABEL: origin,
            },
            "annotations": dict(metadata.get("annotations") or {}),
        },
        "spec": spec,
    }


def orphans(cluster: str, copies: Iterable[Obj], jobs: Iterable[Obj], live: set[tuple[str, str]]) -> list[Action]:
    """Delete a worker's copies (Workloads and Jobs of this origin) whose manager Workload is not in
    ``live`` (``(namespace, name)``; a Job by the Workload its prebuilt label names)."""
    actions: list[Action] = []
    for job in jobs:
        metadata = job["metadata"]
        workload = (metadata.get("labels") or {}).get(PREBUILT_WORKLOAD_LABEL, "")
        if (metadata["namespace"], workload) not in live:
            actions.append(RemoteDelete(cluster, JOBS, metadata["namespace"], metadata["name"]))
    for workload in copies:
        metadata = workload["metadata"]
        if (metadata["namespace"], metadata["name"]) not in live:
            actions.append(RemoteDelete(cluster, WORKLOADS, metadata["namespace"], metadata["name"]))
    return actions


def check_activity(configured: Iterable[str] | None, clusters: Mapping[str, Obj]) -> tuple[str, str, str]:
    """``(status, reason, message)`` of a MultiKueue AdmissionCheck's ``Active``: its config's clusters
    (``None``: the config is missing) against the MultiKueueClusters by name (``admissioncheck.go``)."""
    if configured is None:
        return ("False", "BadConfig", "Cannot load the AdmissionChecks parameters: MultiKueueConfig not found")
    names = list(configured)
    missing = [name for name in names if name not in clusters]
    inactive = [name for name in names if name in clusters and not is_true(clusters[name], "Active")]
    if not missing and not inactive:
        return ("True", "Active", "The admission check is active")
    parts = [f"Missing clusters: {missing}"] if missing else []
    if inactive:
        parts.append(f"Inactive clusters: {inactive}")
    unusable = len(missing) + len(inactive)
    if unusable < len(names):
        return ("True", "SomeActiveClusters", ", ".join(parts))
    return ("False", "NoUsableClusters", ", ".join(parts))


def config_clusters(config: Obj | None) -> list[str] | None:
    """``spec.clusters`` of a MultiKueueConfig, ``None`` when there is no config."""
    if config is None:
        return None
    return [str(name) for name in (config.get("spec") or {}).get("clusters") or []]


def config_name(check: Obj) -> str | None:
    """The MultiKueueConfig a MultiKueue AdmissionCheck's ``spec.parameters`` names."""
    parameters = (check.get("spec") or {}).get("parameters")
    if not isinstance(parameters, Mapping) or parameters.get("kind") != "MultiKueueConfig":
        return None
    name = parameters.get("name")
    return name if isinstance(name, str) else None

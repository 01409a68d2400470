"""Quota reservation of one Workload, as Kueue's scheduler decides it on its snapshot. Pure.

Follows kubernetes-sigs/kueue ``pkg/scheduler/scheduler.go`` (one Workload at a time, in creation
order, BestEffortFIFO) on :class:`~.snapshot.ReservationSnapshot`:

- the LocalQueue, its ClusterQueue, the ClusterQueue's ``namespaceSelector`` and every referenced
  AdmissionCheck must exist and match, else ``QuotaReserved=False/Inadmissible``;
- a ClusterQueue with a TAS flavor whose Topology does not exist is inactive: ``Inadmissible``,
  ``ClusterQueue <name> is inactive``;
- flavors are assigned by :func:`.quota.assign` (cohort borrowing, partial admission), a podSet that
  asks for Topology Aware Scheduling only with a placement in its TAS flavor (:mod:`.tas_admission`);
  a miss leaves ``QuotaReserved=False`` with :func:`.pending.reason_and_message` (``WaitingForQuota``,
  ``ExceedsMaxQuota``, ``NoMatchingFlavor``), or, when the quota fits but the topology does not,
  ``WaitingForQuota`` with Kueue's TAS message (Kueue 0.17 writes reason ``Pending``; the emulator
  answers with Kueue 0.20's typed reasons, :mod:`.pending`);
- success assumes the usage for the rest of the pass (:class:`~.patches.AssumeUsage`), then writes
  ``status.admission``, ``QuotaReserved=True``, the ClusterQueue's checks as ``Pending`` (keeping
  their ``retryCount``) and, without checks, ``Admitted=True`` at once, with Event ``QuotaReserved``.
  With checks no ``Admitted`` condition is written: ``pkg/workload/admissionchecks.go``
  ``SyncAdmittedCondition`` writes one only when ``Admitted`` changes, and a Workload that never was
  admitted has none (``Admitted=False/UnsatisfiedAdmissionChecks`` comes only from a check failing
  after admission, :mod:`.checks`).

Unchanged ``QuotaReserved=False`` reasons and messages are not written again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gang_sim.controllers.base import Obj, condition, is_true
from gang_sim.controllers.kueue import pending, queues, quota, tas
from gang_sim.controllers.kueue.patches import (
    AssumeUsage,
    Condition,
    Patch,
    RecordAdmission,
    RecordEvent,
    WorkloadStatus,
)
from gang_sim.controllers.kueue.snapshot import ReservationSnapshot, timestamp
from gang_sim.controllers.kueue.tas_admission import Placer
from gang_sim.world.resources import format_quantity


def _holds_quota(workload: Obj) -> bool:
    return bool(
        (workload.get("status") or {}).get("admission")
        and is_true(workload, "QuotaReserved")
        and not is_true(workload, "Finished")
    )


def reserved_usage(workloads: list[Obj]) -> quota.Usage:
    """The quota held by Workloads with ``QuotaReserved=True`` and an admission that did not finish."""
    usage: quota.Usage = {}
    for workload in workloads:
        if _holds_quota(workload):
            admission = workload["status"]["admission"]
            quota.add_usage(usage, admission["clusterQueue"], admission.get("podSetAssignments") or [])
    return usage


def reserved_topology_usage(workloads: list[Obj]) -> dict[str, dict[str, Any]]:
    """The TAS usage of the same Workloads: flavor -> leaf id -> resources (:func:`.tas.workload_usage`)."""
    usage: dict[str, dict[str, Any]] = {}
    for workload in workloads:
        if _holds_quota(workload):
            tas.merge_usage(usage, tas.workload_usage(workload))
    return usage


def pod_set_requests(
    workload: Obj, refusals: Callable[[Obj], Mapping[str, str]] | None = None
) -> list[quota.PodSetRequest]:
    """The Workload's ``spec.podSets`` as quota requests (``minCount`` for partial admission; the
    flavors ``refusals`` names refused to the podSet)."""
    return [
        quota.PodSetRequest(
            item["name"],
            int(item.get("count", 1)),
            (item.get("template") or {}).get("spec") or {},
            item.get("minCount"),
            refusals(item) if refusals is not None else {},
        )
        for item in (workload.get("spec") or {}).get("podSets") or []
    ]


def reserve(snapshot: ReservationSnapshot) -> list[Patch]:
    """The patches that reserve quota for ``snapshot.workload``, or record why it gets none."""
    workload, config = snapshot.workload, snapshot.queues
    namespace = workload["metadata"]["namespace"]
    queue_name = (workload.get("spec") or {}).get("queueName", "")
    local_queue = config.local_queues.get((namespace, queue_name))
    if local_queue is None:
        return pending_patches(workload, "Inadmissible", f"LocalQueue {queue_name} doesn't exist")
    cq_name = (local_queue.get("spec") or {}).get("clusterQueue", "")
    cluster_queue = config.cluster_queues.get(cq_name)
    if cluster_queue is None:
        return pending_patches(workload, "Inadmissible", f"ClusterQueue {cq_name} doesn't exist")
    if not queues.namespace_selected(cluster_queue, snapshot.namespace_labels):
        return pending_patches(
            workload, "Inadmissible", f"Workload namespace doesn't match ClusterQueue selector {cq_name}"
        )
    check_names = queues.admission_check_names(cluster_queue)
    missing = [name for name in check_names if name not in config.admission_checks]
    if missing:
        return pending_patches(
            workload, "Inadmissible", f"ClusterQueue {cq_name} is inactive: admission check {missing[0]} not found"
        )
    if tas.missing_topology(cluster_queue, config.flavors, config.topologies):
        return pending_patches(workload, "Inadmissible", f"ClusterQueue {cq_name} is inactive")
    cohort_name = queues.cohort_of(cluster_queue)
    cohort = [item for item in config.cluster_queues.values() if cohort_name and queues.cohort_of(item) == cohort_name]
    placer = Placer(workload, cluster_queue, config, snapshot.topology)
    requests = pod_set_requests(workload, lambda pod_set: placer.refusals(pod_set, cluster_queue))
    members = cohort or [cluster_queue]
    assignments = quota.assign(requests, cluster_queue, members, config.flavors, snapshot.usage, placer.accept)
    if assignments is None:
        if placer.failure is not None:
            return pending_patches(workload, pending.WAITING_FOR_QUOTA, placer.failure)
        return pending_patches(
            workload,
            *pending.reason_and_message(requests, cluster_queue, members, config.flavors, snapshot.usage),
        )
    pod_set_assignments = [_pod_set_assignment(item, placer.topology_assignment(item.name)) for item in assignments]
    previous = {item["name"]: item for item in (workload.get("status") or {}).get("admissionChecks") or []}
    check_entries = [
        {
            "name": name,
            "state": "Pending",
            "message": "",
            "lastTransitionTime": timestamp(snapshot.wall_clock),
            **({"retryCount": previous[name]["retryCount"]} if previous.get(name, {}).get("retryCount") else {}),
        }
        for name in check_names
    ]
    reserved = f"Quota reserved in ClusterQueue {cq_name}"
    updates = [Condition("QuotaReserved", "True", "QuotaReserved", reserved)]
    if is_true(workload, "Evicted"):
        updates.append(Condition("Evicted", "False", "QuotaReserved", "Previously: evicted"))
    patches: list[Patch] = [AssumeUsage(cq_name, tuple(pod_set_assignments), placer.usage())]
    if not check_names:
        updates.append(Condition("Admitted", "True", "Admitted", "The workload is admitted"))
        patches.append(RecordAdmission(workload["metadata"]["uid"], snapshot.now))
    admission = {"clusterQueue": cq_name, "podSetAssignments": pod_set_assignments}
    status = {"admission": admission, "admissionChecks": check_entries}
    return [*patches, WorkloadStatus(tuple(updates), status), RecordEvent("QuotaReserved", reserved)]


def _pod_set_assignment(item: quota.PodSetAssignment, topology: dict[str, Any] | None) -> dict[str, Any]:
    """One ``status.admission.podSetAssignments`` entry."""
    entry: dict[str, Any] = {
        "name": item.name,
        "count": item.count,
        "flavors": item.flavors,
        "resourceUsage": {resource: format_quantity(amount) for resource, amount in item.usage.items()},
    }
    if topology is not None:
        entry["topologyAssignment"] = topology
    return entry


def pending_patches(workload: Obj, reason: str, message: str) -> list[Patch]:
    """``QuotaReserved=False/<reason>`` unless the condition already says so."""
    current = condition(workload, "QuotaReserved")
    if current is not None and (current.get("reason"), current.get("message")) == (reason, message):
        return []
    return [WorkloadStatus((Condition("QuotaReserved", "False", reason, message),))]

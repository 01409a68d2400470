"""Quota reservation of one Workload, as Kueue's scheduler decides it on its snapshot. Pure.

Follows kubernetes-sigs/kueue ``pkg/scheduler/scheduler.go`` (one Workload at a time, in creation
order, BestEffortFIFO) on :class:`~.snapshot.ReservationSnapshot`:

- the LocalQueue, its ClusterQueue, the ClusterQueue's ``namespaceSelector`` and every referenced
  AdmissionCheck must exist and match, else ``QuotaReserved=False/Inadmissible``;
- flavors are assigned by :func:`.quota.assign` (cohort borrowing, partial admission); a miss leaves
  ``QuotaReserved=False`` with :func:`.pending.reason_and_message` (``WaitingForQuota``,
  ``ExceedsMaxQuota``, ``NoMatchingFlavor``);
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

from gang_sim.controllers.base import Obj, condition, is_true
from gang_sim.controllers.kueue import pending, queues, quota
from gang_sim.controllers.kueue.patches import (
    AssumeUsage,
    Condition,
    Patch,
    RecordAdmission,
    RecordEvent,
    WorkloadStatus,
)
from gang_sim.controllers.kueue.snapshot import ReservationSnapshot, timestamp
from gang_sim.world.resources import format_quantity


def reserved_usage(workloads: list[Obj]) -> quota.Usage:
    """The quota held by Workloads with ``QuotaReserved=True`` and an admission that did not finish."""
    usage: quota.Usage = {}
    for workload in workloads:
        admission = (workload.get("status") or {}).get("admission")
        if admission and is_true(workload, "QuotaReserved") and not is_true(workload, "Finished"):
            quota.add_usage(usage, admission["clusterQueue"], admission.get("podSetAssignments") or [])
    return usage


def pod_set_requests(workload: Obj) -> list[quota.PodSetRequest]:
    """The Workload's ``spec.podSets`` as quota requests (``minCount`` for partial admission)."""
    return [
        quota.PodSetRequest(
            item["name"],
            int(item.get("count", 1)),
            (item.get("template") or {}).get("spec") or {},
            item.get("minCount"),
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
    cohort_name = queues.cohort_of(cluster_queue)
    cohort = [item for item in config.cluster_queues.values() if cohort_name and queues.cohort_of(item) == cohort_name]
    requests = pod_set_requests(workload)
    members = cohort or [cluster_queue]
    assignments = quota.assign(requests, cluster_queue, members, config.flavors, snapshot.usage)
    if assignments is None:
        return pending_patches(
            workload,
            *pending.reason_and_message(requests, cluster_queue, members, config.flavors, snapshot.usage),
        )
    pod_set_assignments = [
        {
            "name": item.name,
            "count": item.count,
            "flavors": item.flavors,
            "resourceUsage": {resource: format_quantity(amount) for resource, amount in item.usage.items()},
        }
        for item in assignments
    ]
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
    patches: list[Patch] = [AssumeUsage(cq_name, tuple(pod_set_assignments))]
    if not check_names:
        updates.append(Condition("Admitted", "True", "Admitted", "The workload is admitted"))
        patches.append(RecordAdmission(workload["metadata"]["uid"], snapshot.now))
    admission = {"clusterQueue": cq_name, "podSetAssignments": pod_set_assignments}
    status = {"admission": admission, "admissionChecks": check_entries}
    return [*patches, WorkloadStatus(tuple(updates), status), RecordEvent("QuotaReserved", reserved)]


def pending_patches(workload: Obj, reason: str, message: str) -> list[Patch]:
    """``QuotaReserved=False/<reason>`` unless the condition already says so."""
    current = condition(workload, "QuotaReserved")
    if current is not None and (current.get("reason"), current.get("message")) == (reason, message):
        return []
    return [WorkloadStatus((Condition("QuotaReserved", "False", reason, message),))]

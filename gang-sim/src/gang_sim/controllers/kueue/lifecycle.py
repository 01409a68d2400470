"""The workload controller's decisions on one Workload: finish, deactivate, requeue, admit, evict. Pure.

Follows kubernetes-sigs/kueue ``pkg/controller/core/workload_controller.go`` (reference 2.5-2.9, state
machines 7.C-7.E). Each step reads a :class:`~.snapshot.WorkloadSnapshot` and returns a :class:`Step`:
its patches (:mod:`.patches`), when to look again and what the manager does next.

- :func:`wait_for_start`: a Workload not admitted gets ``PodsReady=False/WaitForStart`` as soon as it
  is seen, before any quota is reserved, as Kueue's job reconciler writes it with waitForPodsReady on
  (``pkg/controller/jobframework/reconciler.go``, ``generatePodsReadyCondition``).
- :func:`settle`: an owner that finished gives ``Finished=True``; an inactive Workload holding quota
  is evicted (``Deactivated``); a Workload without quota waits out its requeue time, gets
  ``Requeued=True`` (``Reactivated`` after a deactivation, ``BackoffFinished`` after an eviction),
  then goes to the scheduler (:data:`Next.RESERVE`); one holding quota goes to its admission checks
  (:data:`Next.CHECK`).
- :func:`judge`, on the check states: any ``Rejected`` deactivates (``DeactivationTarget``, then
  ``spec.active=false``; Event ``AdmissionCheckRejected``); any ``Retry`` evicts with
  ``requeueAfterSeconds``; all Ready gives ``Admitted=True`` (Event ``Admitted``) and the owner is
  started (:data:`Next.RUN`).
- :func:`wait_for_pods_ready`: ``PodsReady`` tracks ready + succeeded pods >= count; without it,
  ``waitForPodsReadyTimeoutSeconds`` after admission the Workload is evicted (``PodsReadyTimeout``),
  ``requeueState.count`` grows and it waits ``requeueBase * 2^(n-1)`` (capped); past
  ``requeueLimit`` it is deactivated (``RequeuingLimitExceeded``).
- :func:`evict`: the owner stopped (:func:`.starter.stop`), its ProvisioningRequests and PodTemplates
  deleted (``CleanupProvisioningRequestsOnEviction``), ``Evicted=True``, ``QuotaReserved=False``,
  ``Admitted=False``, ``status.admission`` removed, checks back to ``Pending`` (``Rejected`` stays),
  and with a requeue delay ``Requeued=False`` and ``requeueState.requeueAt``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from gang_sim.controllers.autoscaler import provisioning as pr
from gang_sim.controllers.base import Obj, condition, is_true
from gang_sim.controllers.kueue import starter
from gang_sim.controllers.kueue import workloads as wl
from gang_sim.controllers.kueue.patches import (
    Condition,
    DeleteControlled,
    Patch,
    PatchObject,
    RecordAdmission,
    RecordEvent,
    RequeueAt,
    WorkloadStatus,
)
from gang_sim.controllers.kueue.snapshot import WorkloadSnapshot, timestamp

WAIT_FOR_START = Condition("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded")


class Next(enum.Enum):
    """What the manager does after a step's patches."""

    DONE = "done"
    RESERVE = "reserve"  # :func:`.scheduler.reserve`
    CHECK = "check"  # :func:`.checks.sync_checks`, then :func:`judge`
    RUN = "run"  # :func:`.starter.start`, then :func:`wait_for_pods_ready`


@dataclass(frozen=True)
class Step:
    """A step's patches, the simulated time to look again (None: on the next change) and what follows.

    ``reread``: the Workload was just admitted; :data:`Next.RUN` works on it as stored now.
    """

    patches: list[Patch] = field(default_factory=list)
    wake: float | None = None
    next: Next = Next.DONE
    reread: bool = False


def is_over(workload: Obj) -> bool:
    """Finished or being deleted: nothing left to decide."""
    return is_true(workload, "Finished") or bool(workload["metadata"].get("deletionTimestamp"))


def wait_for_start(snapshot: WorkloadSnapshot) -> Step:
    """``PodsReady=False/WaitForStart`` on a Workload whose owner has not finished and that is not
    admitted, unless it already says so (upstream writes the condition only when type, status or
    reason change, ``workload.HasConditionWithTypeAndReason``)."""
    workload = snapshot.workload
    if starter.finished(workload, snapshot.owner) is not None or is_true(workload, "Admitted"):
        return Step()
    pods_ready = condition(workload, "PodsReady") or {}
    if (pods_ready.get("status"), pods_ready.get("reason")) == ("False", "WaitForStart"):
        return Step()
    return Step([WorkloadStatus((WAIT_FOR_START,))])


def settle(snapshot: WorkloadSnapshot) -> Step:
    """Everything before the admission checks (see the module docstring)."""
    workload = snapshot.workload
    finished = starter.finished(workload, snapshot.owner)
    if finished is not None:
        return Step([WorkloadStatus((Condition("Finished", "True", *finished),))])
    if (workload.get("spec") or {}).get("active") is False:
        if is_true(workload, "QuotaReserved"):
            return Step(evict(snapshot, "Deactivated", "The workload is deactivated", requeue_after=None))
        return Step()
    if is_true(workload, "QuotaReserved"):
        return Step(next=Next.CHECK)
    if snapshot.requeue_at is not None and snapshot.requeue_at > snapshot.now:
        return Step(wake=snapshot.requeue_at)
    evicted = condition(workload, "Evicted") or {}
    requeued = condition(workload, "Requeued") or {}
    if evicted.get("status") == "True" and evicted.get("reason") == "Deactivated":
        if requeued.get("reason") != "Reactivated":
            reactivated = "The workload was reactivated"
            return Step(
                [
                    WorkloadStatus(
                        (
                            Condition("Requeued", "True", "Reactivated", reactivated),
                            Condition("DeactivationTarget", "False", "Reactivated", reactivated),
                        )
                    )
                ]
            )
    elif evicted.get("status") == "True" and requeued.get("status") == "False":
        backoff = Condition("Requeued", "True", "BackoffFinished", "The workload backoff was finished")
        return Step([WorkloadStatus((backoff,))])
    return Step(next=Next.RESERVE)


def judge(snapshot: WorkloadSnapshot, check_states: list[dict[str, Any]]) -> Step:
    """What the admission checks' ``check_states`` mean for a Workload holding quota."""
    workload = snapshot.workload
    if any(item["state"] == "Rejected" for item in check_states):
        message = "At least one admission check is rejected"
        rejected = RecordEvent("AdmissionCheckRejected", message, warning=True)
        return Step([*deactivate(workload, "AdmissionCheck", message), rejected])
    retry = [item for item in check_states if item["state"] == "Retry"]
    if retry:
        delay = float(max(item.get("requeueAfterSeconds", 0) for item in retry))
        message = "At least one admission check is false"
        return Step(evict(snapshot, "AdmissionCheck", message, requeue_after=delay), wake=snapshot.now + delay)
    if check_states and not all(item["state"] == "Ready" for item in check_states):
        return Step()
    if is_true(workload, "Admitted"):
        return Step(next=Next.RUN)
    cluster_queue = workload["status"]["admission"]["clusterQueue"]
    admitted = WorkloadStatus((Condition("Admitted", "True", "Admitted", "The workload is admitted"),))
    patches: list[Patch] = [
        admitted,
        RecordAdmission(workload["metadata"]["uid"], snapshot.now),
        RecordEvent("Admitted", f"Admitted by ClusterQueue {cluster_queue}"),
    ]
    return Step(patches, next=Next.RUN, reread=True)


def wait_for_pods_ready(snapshot: WorkloadSnapshot) -> Step:
    """``PodsReady`` and the waitForPodsReady timeout of an admitted, started Workload."""
    workload, settings, now = snapshot.workload, snapshot.settings, snapshot.now
    ready, total = starter.ready_pods(workload, snapshot.owner)
    if ready >= total:
        if is_true(workload, "PodsReady"):
            return Step()
        started = Condition("PodsReady", "True", "Started", "All pods reached readiness and the workload is running")
        return Step([WorkloadStatus((started,))])
    if is_true(workload, "PodsReady"):
        return Step()
    patches: list[Patch] = []
    if (condition(workload, "PodsReady") or {}).get("reason") != "WaitForStart":
        patches.append(WorkloadStatus((WAIT_FOR_START,)))
    admitted_at = snapshot.admitted_at
    if admitted_at is None:
        admitted_at = now
        patches.append(RecordAdmission(workload["metadata"]["uid"], now))
    deadline = admitted_at + settings.wait_for_pods_ready_timeout_seconds
    if now < deadline:
        return Step(patches, wake=deadline)
    count = int(((workload.get("status") or {}).get("requeueState") or {}).get("count", 0)) + 1
    limit = settings.requeue_limit
    if limit is not None and count > limit:
        message = "exceeding the maximum number of re-queuing retries"
        return Step([*patches, *deactivate(workload, "RequeuingLimitExceeded", message)])
    delay = min(settings.requeue_max_seconds, settings.requeue_base_seconds * 2 ** (count - 1))
    metadata = workload["metadata"]
    message = f"Exceeded the PodsReady timeout {metadata['namespace']}/{metadata['name']}"
    # PodsReady is set by now (written above when it was missing): the eviction resets it
    eviction = evict(
        snapshot, "PodsReadyTimeout", message, requeue_after=delay, requeue_count=count, resets_pods_ready=True
    )
    return Step([*patches, *eviction], wake=float(now + delay))


def deactivate(workload: Obj, reason: str, message: str) -> list[Patch]:
    """``DeactivationTarget=True/<reason>``, then ``spec.active=false``."""
    metadata = workload["metadata"]
    return [
        WorkloadStatus((Condition("DeactivationTarget", "True", reason, message),)),
        PatchObject(wl.WORKLOADS, metadata["name"], {"spec": {"active": False}}, namespace=metadata["namespace"]),
    ]


def evict(
    snapshot: WorkloadSnapshot,
    reason: str,
    message: str,
    *,
    requeue_after: float | None,
    requeue_count: int | None = None,
    resets_pods_ready: bool | None = None,
) -> list[Patch]:
    """Evict with ``reason``; ``requeue_after`` seconds of backoff (None: no requeue, deactivated).

    ``resets_pods_ready`` (default: the Workload has a ``PodsReady`` condition) adds
    ``PodsReady=False/WaitForStart``; ``requeue_count`` replaces ``requeueState.count``, else it is kept.
    """
    workload = snapshot.workload
    metadata, status = workload["metadata"], workload.get("status") or {}
    uid, namespace = metadata["uid"], metadata["namespace"]
    patches: list[Patch] = [
        *starter.stop(workload, snapshot.owner),
        DeleteControlled(pr.PROVISIONING_REQUESTS, namespace, uid),
        DeleteControlled("v1/podtemplates", namespace, uid),
        RecordAdmission(uid, None),
    ]
    updates = [
        Condition("Evicted", "True", reason, message),
        Condition("QuotaReserved", "False", reason, message),
        Condition("Admitted", "False", "NoReservation", "The workload has no reservation"),
    ]
    if resets_pods_ready is None:
        resets_pods_ready = condition(workload, "PodsReady") is not None
    if resets_pods_ready:
        updates.append(WAIT_FOR_START)
    entries = [
        {
            **{k: v for k, v in item.items() if k != "podSetUpdates"},
            "state": "Pending" if item["state"] != "Rejected" else "Rejected",
        }
        for item in status.get("admissionChecks") or []
    ]
    fields: dict[str, Any] = {"admission": None, "admissionChecks": entries}
    if requeue_after is not None:
        patches.append(RequeueAt(uid, snapshot.now + requeue_after))
        updates.append(Condition("Requeued", "False", reason, message))
        state: dict[str, Any] = {"requeueAt": timestamp(snapshot.wall_clock, requeue_after)}
        if requeue_count is not None:
            state["count"] = requeue_count
        elif (status.get("requeueState") or {}).get("count"):
            state["count"] = status["requeueState"]["count"]
        fields["requeueState"] = state
    evicted = RecordEvent("EvictedDueTo" + reason, message, warning=True)
    return [*patches, WorkloadStatus(tuple(updates), fields), evicted]

"""Predicates over the conditions and fields of observed objects (plain dicts, wire format).

Objects are read defensively: a missing ``status``, ``conditions`` or field reads as "not set",
never as an error, because controllers write status in several steps and the trigger may observe
any of them. A condition counts only with ``status: "True"`` (the strings Kubernetes uses).

ProvisioningRequest condition types are from ``autoscaling.x-k8s.io/v1`` ``types.go``; Workload
condition types and admission-check states from Kueue ``apis/kueue/v1beta2/workload_types.go``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

Object = Mapping[str, Any]
State = TypeVar("State")

# ProvisioningRequest condition types.
ACCEPTED = "Accepted"
PROVISIONED = "Provisioned"
FAILED = "Failed"
BOOKING_EXPIRED = "BookingExpired"
CAPACITY_REVOKED = "CapacityRevoked"
BOOKING_CONSUMED_REASON = "CapacityBookingConsumed"
"""``BookingExpired`` reason meaning every consuming pod is bound (autoscaler PR #9806): not a loss."""

# Workload condition types.
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
FINISHED = "Finished"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
PREEMPTED_REASON = "Preempted"

# Admission check states.
CHECK_PENDING = "Pending"
CHECK_READY = "Ready"
CHECK_RETRY = "Retry"
CHECK_REJECTED = "Rejected"


def conditions_of(obj: Object | None) -> Sequence[Object]:
    """``status.conditions`` of ``obj``, or an empty list."""
    if not obj:
        return ()
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return [condition for condition in conditions if isinstance(condition, Mapping)]


def find_condition(obj: Object | None, condition_type: str) -> Object | None:
    """The condition of ``condition_type`` (the last one if a buggy writer repeated it), or ``None``."""
    found = None
    for condition in conditions_of(obj):
        if condition.get("type") == condition_type:
            found = condition
    return found


def is_condition_true(obj: Object | None, condition_type: str) -> bool:
    condition = find_condition(obj, condition_type)
    return condition is not None and condition.get("status") == "True"


def condition_message(obj: Object | None, condition_type: str) -> str:
    """``reason: message`` of a condition (either part may be missing), or ``""``."""
    condition = find_condition(obj, condition_type)
    if condition is None:
        return ""
    reason, message = condition.get("reason") or "", condition.get("message") or ""
    return f"{reason}: {message}" if reason and message else reason or message


# ProvisioningRequest ------------------------------------------------------------------------------


def has_no_conditions(obj: Object | None) -> bool:
    """No controller has handled the object yet."""
    return not conditions_of(obj)


def is_accepted(request: Object | None) -> bool:
    return is_condition_true(request, ACCEPTED)


def is_provisioned(request: Object | None) -> bool:
    return is_condition_true(request, PROVISIONED)


def is_failed(request: Object | None) -> bool:
    return is_condition_true(request, FAILED)


def is_booking_expired(request: Object | None) -> bool:
    return is_condition_true(request, BOOKING_EXPIRED)


def is_booking_consumed(request: Object | None) -> bool:
    """``BookingExpired=True`` because every consuming pod was bound, not because time ran out."""
    condition = find_condition(request, BOOKING_EXPIRED)
    return is_booking_expired(request) and condition is not None and condition.get("reason") == BOOKING_CONSUMED_REASON


def is_capacity_revoked(request: Object | None) -> bool:
    return is_condition_true(request, CAPACITY_REVOKED)


# Workload -----------------------------------------------------------------------------------------


def is_quota_reserved(workload: Object | None) -> bool:
    return is_condition_true(workload, QUOTA_RESERVED)


def is_admitted(workload: Object | None) -> bool:
    return is_condition_true(workload, ADMITTED)


def is_finished(workload: Object | None) -> bool:
    return is_condition_true(workload, FINISHED)


def is_evicted(workload: Object | None) -> bool:
    return is_condition_true(workload, EVICTED)


def is_preempted(workload: Object | None) -> bool:
    """``Preempted=True``, or ``Evicted=True`` with reason ``Preempted``."""
    if is_condition_true(workload, PREEMPTED):
        return True
    evicted = find_condition(workload, EVICTED)
    return is_evicted(workload) and evicted is not None and evicted.get("reason") == PREEMPTED_REASON


def is_active(workload: Object | None) -> bool:
    """``spec.active`` defaults to true; only an explicit ``false`` deactivates."""
    return ((workload or {}).get("spec") or {}).get("active") is not False


def admission_checks(workload: Object | None) -> Sequence[Object]:
    """``status.admissionChecks`` of the Workload, or an empty list."""
    checks = ((workload or {}).get("status") or {}).get("admissionChecks") or ()
    return [check for check in checks if isinstance(check, Mapping)]


def checks_in_state(workload: Object | None, state: str) -> list[Object]:
    return [check for check in admission_checks(workload) if check.get("state") == state]


def has_rejected_check(workload: Object | None) -> bool:
    return bool(checks_in_state(workload, CHECK_REJECTED))


def has_retry_check(workload: Object | None) -> bool:
    return bool(checks_in_state(workload, CHECK_RETRY))


def admitted_count(workload: Object | None) -> int | None:
    """Members admitted (sum of ``status.admission.podSetAssignments[].count``); ``None`` before admission.

    With partial admission (``job-min-parallelism``) this is below the requested size.
    """
    admission = ((workload or {}).get("status") or {}).get("admission")
    if not admission:
        return None
    assignments = admission.get("podSetAssignments") or ()
    total = 0
    for assignment in assignments:
        count = assignment.get("count") if isinstance(assignment, Mapping) else None
        if not isinstance(count, int):
            return None
        total += count
    return total if assignments else None


# Pods ---------------------------------------------------------------------------------------------


def pod_phase(pod: Object) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminating(pod: Object) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_bound(pod: Object) -> bool:
    """Scheduled to a node (``spec.nodeName`` set)."""
    return bool((pod.get("spec") or {}).get("nodeName"))


def has_gate(pod: Object, gate: str) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or ()
    return any(isinstance(entry, Mapping) and entry.get("name") == gate for entry in gates)


def is_disrupted(pod: Object) -> bool:
    """Kubernetes marked the pod for disruption (``DisruptionTarget=True``: preemption, eviction,
    node lost, taint manager) - it will die for reasons outside the program."""
    return is_condition_true(pod, "DisruptionTarget")


def first_match(obj: Object, precedence: Sequence[tuple[Callable[[Object], bool], State]], otherwise: State) -> State:
    """The state paired with the first predicate of ``precedence`` that holds for ``obj``, else
    ``otherwise``: how the classifiers apply their "first match wins" tables."""
    return next((state for holds, state in precedence if holds(obj)), otherwise)

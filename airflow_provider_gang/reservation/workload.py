"""Where a Kueue Workload stands: :func:`classify_workload`.

Precedence, first match wins (states from the Workload state machine of Kueue v1beta2,
``pkg/controller/core/workload_controller.go``)::

    Finished=True                          -> FINISHED     the job ended (or its owner vanished)
    spec.active == false                   -> INACTIVE     deactivated: rejected check, requeue limit, user
    any admission check Rejected           -> REJECTED     Kueue is about to deactivate it
    Preempted=True / Evicted(Preempted)    -> PREEMPTED    a higher-priority workload took the quota
    any admission check Retry              -> RETRY        e.g. its ProvisioningRequest failed; Kueue backs off
    Evicted=True (any other reason)        -> EVICTED      PodsReadyTimeout, ClusterQueueStopped, NodeFailures...
    Admitted=True and every check Ready    -> ADMITTED     quota reserved and every check Ready
    QuotaReserved=True                     -> QUOTA_RESERVED  waiting for admission checks
    otherwise                              -> PENDING      waiting for quota

The admission checks' states are authoritative over ``Admitted``: Kueue <= 0.19.2 could write
``Admitted=True`` beside a Rejected check (kubernetes-sigs/kueue #14871, fixed in 0.19.3,
``CHANGELOG/CHANGELOG-0.19.md``), so a Workload whose checks are not all Ready is never ADMITTED.
A PENDING Workload is described by its ``QuotaReserved=False`` reason, typed since Kueue 0.20
(``UnadmittedWorkloadsObservability``, #13063): ``WaitingForQuota``, ``ExceedsMaxQuota``,
``Inadmissible``, ``Misconfigured``, ``Suspended``, ... (:func:`pending_reason`: ``"ExceedsMaxQuota -
<message>"``); older Kueue writes ``Pending``.

A Rejected check outranks eviction because Kueue evicts *because of* the rejection; Retry likewise
outranks the ``Evicted/AdmissionCheck`` it causes. ``None`` (no Workload yet; Kueue creates it after
the Job) is MISSING.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from airflow_provider_gang.reservation import conditions
from airflow_provider_gang.reservation.conditions import Object


class WorkloadState(str, Enum):
    MISSING = "missing"
    PENDING = "pending"
    QUOTA_RESERVED = "quota_reserved"
    ADMITTED = "admitted"
    RETRY = "retry"
    REJECTED = "rejected"
    PREEMPTED = "preempted"
    EVICTED = "evicted"
    INACTIVE = "inactive"
    FINISHED = "finished"


def _is_inactive(workload: Object) -> bool:
    return not conditions.is_active(workload)


def _is_admitted(workload: Object) -> bool:
    checks = conditions.admission_checks(workload)
    return conditions.is_admitted(workload) and all(check.get("state") == conditions.CHECK_READY for check in checks)


_PRECEDENCE: tuple[tuple[Callable[[Object], bool], WorkloadState], ...] = (
    (conditions.is_finished, WorkloadState.FINISHED),
    (_is_inactive, WorkloadState.INACTIVE),
    (conditions.has_rejected_check, WorkloadState.REJECTED),
    (conditions.is_preempted, WorkloadState.PREEMPTED),
    (conditions.has_retry_check, WorkloadState.RETRY),
    (conditions.is_evicted, WorkloadState.EVICTED),
    (_is_admitted, WorkloadState.ADMITTED),
    (conditions.is_quota_reserved, WorkloadState.QUOTA_RESERVED),
)


def classify_workload(workload: Object | None) -> WorkloadState:
    """The state of ``workload`` by the precedence in the module docstring. Pure."""
    if workload is None:
        return WorkloadState.MISSING
    return conditions.first_match(workload, _PRECEDENCE, WorkloadState.PENDING)


def describe(workload: Object | None) -> str:
    """Human text for the state of ``workload``: the deciding check's or condition's message."""
    state = classify_workload(workload)
    check_state = {WorkloadState.REJECTED: conditions.CHECK_REJECTED, WorkloadState.RETRY: conditions.CHECK_RETRY}
    if state in check_state:
        check = conditions.checks_in_state(workload, check_state[state])[0]
        return f"admission check {check.get('name')!r} is {check.get('state')}: {check.get('message') or ''}".rstrip(
            ": "
        )
    if state is WorkloadState.QUOTA_RESERVED:
        pending = conditions.checks_in_state(workload, conditions.CHECK_PENDING)
        if pending:
            return "; ".join(
                f"admission check {check.get('name')!r} pending: {check.get('message') or 'no message'}"
                for check in pending
            )
    if state is WorkloadState.PENDING:
        return pending_reason(workload)
    condition_type = {
        WorkloadState.FINISHED: conditions.FINISHED,
        WorkloadState.INACTIVE: conditions.EVICTED,
        WorkloadState.PREEMPTED: conditions.PREEMPTED,
        WorkloadState.EVICTED: conditions.EVICTED,
        WorkloadState.ADMITTED: conditions.ADMITTED,
        WorkloadState.QUOTA_RESERVED: conditions.QUOTA_RESERVED,
    }.get(state)
    if condition_type is None:
        return ""
    text = conditions.condition_message(workload, condition_type)
    if not text and state is WorkloadState.PREEMPTED:
        text = conditions.condition_message(workload, conditions.EVICTED)
    return text


def pending_reason(workload: Object | None) -> str:
    """``"ExceedsMaxQuota - <message>"`` from ``QuotaReserved=False`` (reason and message), else ``""``."""
    found = conditions.find_condition(workload, conditions.QUOTA_RESERVED)
    if found is None or found.get("status") == "True":
        return ""
    reason, message = found.get("reason") or "", found.get("message") or ""
    return " - ".join(str(part) for part in (reason, message) if part)

"""Where a ``workload`` gang stands: its PodGroup's status and its members' binding.

The kube-scheduler (v1.37, ``pkg/scheduler/schedule_one_podgroup.go``) reports a pod group
scheduling cycle in the PodGroup's ``PodGroupInitiallyScheduled`` condition
(``scheduling/v1beta1/types.go``): ``True``/``Scheduled`` once the gang was placed (terminal: it
never reverts, even after evictions), ``False`` with reason ``Unschedulable`` (not enough room for
``minCount`` pods at once, affinity...) or ``SchedulerError`` (an internal error, e.g. a bad node
affinity) otherwise; a pod that waited at Permit for its peers past the plugin's 5 minutes
(``gangscheduling.go`` ``permitTimeoutDuration``) is rejected back to the queue and shows the same
``Unschedulable``. ``DisruptionTarget``/``PreemptionByScheduler`` says the group is being preempted by
workload-aware preemption.

:func:`classify` reads them, first match wins:

- the PodGroup gone -> GONE (deleted before the gang was bound: nothing will place it);
- ``DisruptionTarget=True`` -> PREEMPTED;
- a rank without a live member -> MISSING_MEMBERS;
- every member bound -> BOUND (the reservation is granted: the members are on their nodes);
- ``Unschedulable`` -> UNSCHEDULABLE, ``SchedulerError`` -> SCHEDULER_ERROR: the scheduler keeps
  trying (the group is requeued on cluster events, a new node included), so these wait - the try's
  own deadline ends them, and the ladder reads that deadline;
- ``InitiallyScheduled=True`` with members still unbound -> BINDING (the binding calls in flight);
- otherwise WAITING (the scheduler has not tried the group yet: PreEnqueue holds a group with fewer
  than ``minCount`` pods).

:func:`reservation_decision` and :func:`run_failure` turn the states into the provider's typed reasons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from airflow_provider_gang.reservation import conditions
from airflow_provider_gang.reservation.members import member_rank
from airflow_provider_gang.reservation.outcome import Decision
from airflow_provider_gang.reservation.phases import Phase, Reason

INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
DISRUPTION_TARGET = "DisruptionTarget"
UNSCHEDULABLE_REASON = "Unschedulable"
SCHEDULER_ERROR_REASON = "SchedulerError"

Object = Mapping[str, Any]


class PodGroupState(str, Enum):
    GONE = "gone"
    PREEMPTED = "preempted"
    MISSING_MEMBERS = "missing_members"
    BOUND = "bound"
    UNSCHEDULABLE = "unschedulable"
    SCHEDULER_ERROR = "scheduler_error"
    BINDING = "binding"
    WAITING = "waiting"


def live_members(pods: Iterable[Object], *, size: int) -> dict[int, Object]:
    """The gang's members by rank, those being deleted left out."""
    live: dict[int, Object] = {}
    for pod in pods:
        rank = member_rank(pod)
        if rank is not None and rank < size and not conditions.is_terminating(pod):
            live[rank] = pod
    return live


def missing_ranks(pods: Iterable[Object], *, size: int) -> list[int]:
    live = live_members(pods, size=size)
    return [rank for rank in range(size) if rank not in live]


def classify(pod_group: Object | None, pods: Iterable[Object], *, size: int) -> PodGroupState:
    """The state of a ``workload`` gang (module docstring)."""
    if pod_group is None:
        return PodGroupState.GONE
    if conditions.is_condition_true(pod_group, DISRUPTION_TARGET):
        return PodGroupState.PREEMPTED
    live = live_members(pods, size=size)
    if len(live) < size:
        return PodGroupState.MISSING_MEMBERS
    if all(conditions.is_bound(pod) for pod in live.values()):
        return PodGroupState.BOUND
    scheduled = conditions.find_condition(pod_group, INITIALLY_SCHEDULED) or {}
    if scheduled.get("status") == "True":
        return PodGroupState.BINDING
    if scheduled.get("reason") == UNSCHEDULABLE_REASON:
        return PodGroupState.UNSCHEDULABLE
    if scheduled.get("reason") == SCHEDULER_ERROR_REASON:
        return PodGroupState.SCHEDULER_ERROR
    return PodGroupState.WAITING


def describe(pod_group: Object | None) -> str:
    """The scheduler's own words: the message of the group's latest condition ("" if none)."""
    for condition_type in (DISRUPTION_TARGET, INITIALLY_SCHEDULED):
        message = conditions.condition_message(pod_group, condition_type)
        if message:
            return message
    return ""


def bound_count(pods: Iterable[Object], *, size: int) -> int:
    return sum(1 for pod in live_members(pods, size=size).values() if conditions.is_bound(pod))


_OUTCOMES: dict[PodGroupState, tuple[Phase, Reason, str]] = {
    PodGroupState.GONE: (Phase.FAILED, Reason.RESERVATION_GONE, "was deleted before its members were bound"),
    PodGroupState.PREEMPTED: (Phase.FAILED, Reason.PREEMPTED, "is being preempted by the scheduler"),
    PodGroupState.MISSING_MEMBERS: (Phase.FAILED, Reason.MEMBER_LOST, "lost members before they were bound"),
    PodGroupState.BOUND: (Phase.RESERVED, Reason.RESERVED, "placed: every member bound together"),
    PodGroupState.UNSCHEDULABLE: (
        Phase.PENDING,
        Reason.WAITING_FOR_CAPACITY,
        "cannot be placed all at once yet; the scheduler retries",
    ),
    PodGroupState.SCHEDULER_ERROR: (Phase.PENDING, Reason.WAITING_FOR_CAPACITY, "hit a scheduler error; it retries"),
    PodGroupState.BINDING: (Phase.PENDING, Reason.WAITING_FOR_CAPACITY, "scheduled, members being bound"),
    PodGroupState.WAITING: (Phase.PENDING, Reason.NOT_HANDLED_YET, "not tried by the scheduler yet"),
}


def reservation_decision(pod_group: Object | None, pods: Iterable[Object], *, size: int) -> Decision:
    """The reservation-stage decision of a ``workload`` gang."""
    members = list(pods)
    state = classify(pod_group, members, size=size)
    phase, reason, summary = _OUTCOMES[state]
    detail = describe(pod_group)
    if state is PodGroupState.MISSING_MEMBERS:
        summary = f"{summary}: rank(s) {missing_ranks(members, size=size)} missing or deleted"
    elif state in (PodGroupState.UNSCHEDULABLE, PodGroupState.SCHEDULER_ERROR, PodGroupState.BINDING):
        summary = f"{summary}; {bound_count(members, size=size)} of {size} members bound"
    name = ((pod_group or {}).get("metadata") or {}).get("name")
    message = f"PodGroup {name or 'of the gang'} {summary}" + (f" ({detail})" if detail else "")
    terminal = phase in (Phase.RESERVED, Phase.FAILED)
    return Decision(
        phase=phase,
        terminal=terminal,
        reason=reason,
        message=message,
        admitted_count=size if phase is Phase.RESERVED else None,
    )


def run_failure(pod_group: Object | None, *, size: int) -> Decision | None:
    """The PodGroup ending a running ``workload`` gang whatever its pods say (the scheduler preempting
    the group), or ``None``. A PodGroup deleted while the gang runs ends nothing by itself: the
    members hold their nodes, and their own states decide."""
    if pod_group is None or not conditions.is_condition_true(pod_group, DISRUPTION_TARGET):
        return None
    return reservation_decision(pod_group, (), size=size)

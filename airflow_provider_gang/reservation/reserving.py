"""Reservation-stage rules of :func:`reservation.decision.decide` (see its module docstring)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.reservation import conditions, members, multikueue, pod_group, provisioning, workload
from airflow_provider_gang.reservation.observed import Observed
from airflow_provider_gang.reservation.outcome import Decision
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.provisioning import ProvisioningState
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.reservation.workload import WorkloadState

CAPACITY_NOT_FOUND_REASON = "CapacityIsNotFound"

_PROVISIONING_OUTCOMES: dict[ProvisioningState, tuple[Phase, Reason, str]] = {
    ProvisioningState.GONE: (Phase.FAILED, Reason.RESERVATION_GONE, "was deleted before it was granted"),
    ProvisioningState.NOT_HANDLED: (Phase.PENDING, Reason.NOT_HANDLED_YET, "not handled by a controller yet"),
    ProvisioningState.ACCEPTED: (Phase.PENDING, Reason.WAITING_FOR_CAPACITY, "accepted, waiting for capacity"),
    ProvisioningState.PROVISIONED: (Phase.RESERVED, Reason.RESERVED, "provisioned"),
    ProvisioningState.BOOKING_CONSUMED: (Phase.RESERVED, Reason.RESERVED, "provisioned, booking consumed by our pods"),
    ProvisioningState.BOOKING_EXPIRED: (Phase.FAILED, Reason.BOOKING_EXPIRED, "booking expired before binding"),
    ProvisioningState.CAPACITY_REVOKED: (Phase.FAILED, Reason.CAPACITY_REVOKED, "capacity revoked"),
    ProvisioningState.FAILED: (Phase.FAILED, Reason.PROVISIONING_FAILED, "failed"),
}

_WORKLOAD_OUTCOMES: dict[WorkloadState, tuple[Phase, Reason, str]] = {
    WorkloadState.MISSING: (Phase.PENDING, Reason.WAITING_FOR_OBJECTS, "not created by Kueue yet"),
    WorkloadState.PENDING: (Phase.PENDING, Reason.WAITING_FOR_QUOTA, "waiting for quota"),
    WorkloadState.QUOTA_RESERVED: (Phase.PENDING, Reason.WAITING_FOR_ADMISSION_CHECKS, "quota reserved"),
    WorkloadState.ADMITTED: (Phase.RESERVED, Reason.RESERVED, "admitted"),
    WorkloadState.RETRY: (Phase.FAILED, Reason.KUEUE_RETRY, "admission check asks for a retry"),
    WorkloadState.REJECTED: (Phase.FAILED, Reason.KUEUE_REJECTED, "admission check rejected"),
    WorkloadState.PREEMPTED: (Phase.FAILED, Reason.PREEMPTED, "preempted"),
    WorkloadState.EVICTED: (Phase.FAILED, Reason.EVICTED, "evicted"),
    WorkloadState.INACTIVE: (Phase.FAILED, Reason.WORKLOAD_DEACTIVATED, "deactivated (spec.active=false)"),
    WorkloadState.FINISHED: (Phase.FAILED, Reason.WORKLOAD_FINISHED, "finished before the gang started"),
}


def _decision(phase: Phase, reason: Reason, message: str, admitted_count: int | None = None) -> Decision:
    terminal = phase in (Phase.RESERVED, Phase.FAILED)
    return Decision(phase=phase, terminal=terminal, reason=reason, message=message, admitted_count=admitted_count)


def _name(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("name") or "?")


def _with_detail(summary: str, detail: str) -> str:
    return f"{summary} ({detail})" if detail else summary


def from_provisioning_request(request: Mapping[str, Any] | None, size: int) -> Decision:
    """Decision for a ProvisioningRequest alone."""
    state = provisioning.classify_provisioning_request(request)
    phase, reason, summary = _PROVISIONING_OUTCOMES[state]
    if state is ProvisioningState.FAILED and provisioning.failure_reason(request) == CAPACITY_NOT_FOUND_REASON:
        reason = Reason.CAPACITY_NOT_FOUND
    subject = "The gang's ProvisioningRequest" if request is None else f"ProvisioningRequest {_name(request)}"
    message = f"{subject} {_with_detail(summary, provisioning.describe(request))}"
    return _decision(phase, reason, message, size if phase is Phase.RESERVED else None)


def from_workload(observed_workload: Mapping[str, Any] | None, size: int) -> Decision:
    """Decision for a Kueue Workload alone; ``admitted_count`` reflects partial admission, and the
    message names the MultiKueue worker that admitted it (``reservation.multikueue.worker_cluster``)."""
    state = workload.classify_workload(observed_workload)
    phase, reason, summary = _WORKLOAD_OUTCOMES[state]
    admitted = None
    if phase is Phase.RESERVED:
        admitted = conditions.admitted_count(observed_workload) or size
        if admitted < size:
            summary = f"{summary}, partially: {admitted} of {size} members"
        worker = multikueue.worker_cluster(observed_workload)
        if worker is not None:
            summary = f"{summary} by MultiKueue worker cluster {worker!r}"
    subject = "Workload (not yet created)" if observed_workload is None else f"Workload {_name(observed_workload)}"
    detail = workload.describe(observed_workload)
    if state is WorkloadState.PENDING and detail:  # "waiting for quota: ExceedsMaxQuota - <message>"
        message = f"{subject} {summary}: {detail}"
    else:
        message = f"{subject} {_with_detail(summary, detail)}"
    return _decision(phase, reason, message, admitted)


def decide_reservation(observed: Observed) -> Decision:
    """The reservation-stage decision for ``observed``."""
    if observed.mode is ReservationMode.KUEUE:
        return from_workload(observed.workload, observed.size)
    if observed.mode is ReservationMode.WORKLOAD:
        return pod_group.reservation_decision(observed.pod_group, observed.pods, size=observed.size)
    decision = from_provisioning_request(observed.provisioning_request, observed.size)
    if observed.mode is not ReservationMode.GATES:
        return decision
    if observed.scheduling_gate is None:
        raise ValueError("Observed.scheduling_gate is required in gates mode")
    gate_state = members.classify_gated_pods(observed.pods, size=observed.size, gate=observed.scheduling_gate)
    if gate_state is members.GateState.MISSING_MEMBERS:
        present = members.members_by_rank(
            [pod for pod in observed.pods if not conditions.is_terminating(pod)], size=observed.size
        )
        missing = [rank for rank, member in present.items() if member.state is members.MemberState.MISSING]
        message = f"gated member(s) of rank {missing} missing or deleted; {decision.message}"
        return _decision(Phase.FAILED, Reason.MEMBER_LOST, message)
    return _decision(
        decision.phase, decision.reason, f"{decision.message}; members {gate_state.value}", decision.admitted_count
    )

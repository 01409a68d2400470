"""``decide(observed, *, now, policy)``: the one function that says where a gang stands.

A purely computational function with no side effects: triggers (deferrable) and the operator's
blocking mode feed it what they observed and act on the :class:`Decision`; neither re-implements it.

Reservation stage, by mode (the classifiers document their own precedence):

- ``provisioning_request``: :func:`provisioning.classify_provisioning_request`. PROVISIONED (or its
  booking consumed by our pods) -> RESERVED; FAILED -> CAPACITY_NOT_FOUND if upstream said
  ``CapacityIsNotFound``, else PROVISIONING_FAILED; BOOKING_EXPIRED, CAPACITY_REVOKED -> same-named
  reasons; object gone -> RESERVATION_GONE; otherwise waiting.
- ``gates``: as ``provisioning_request``, and additionally every gated member must exist
  (:func:`members.classify_gated_pods`); a missing member -> MEMBER_LOST. A member lost outranks a
  granted request: launching a gang with a hole in it would waste the reservation.
- ``kueue``: :func:`workload.classify_workload`. ADMITTED -> RESERVED with ``admitted_count``
  (partial admission); REJECTED, RETRY, PREEMPTED, EVICTED, INACTIVE, FINISHED -> failures;
  MISSING, PENDING, QUOTA_RESERVED -> waiting.
- ``workload``: :func:`pod_group.classify` of the PodGroup and its members. Every member bound ->
  RESERVED; the PodGroup gone -> RESERVATION_GONE; preempted -> PREEMPTED; a member lost ->
  MEMBER_LOST; ``Unschedulable`` or a scheduler error -> waiting (the scheduler retries; the deadline
  ends it).

Run stage: first a spot preemption (``running._spot_preemption``: ``spot_preempted``, once the
preempted members' containers stopped), then the reservation objects, if given (a revoked
ProvisioningRequest, a preempted or evicted Workload, or a preempted PodGroup, ends the run with
that reason), then
:func:`members.classify_running_gang` - or, for a gang whose pods cannot be read (a MultiKueue worker
without a mapped connection), :func:`job_status.decide_by_job` on its Job's mirrored status.

Deadlines, checked *after* classification so an object that reports success at the deadline wins:
``policy.deadline`` ends any non-terminal decision with ``policy.deadline_reason`` (``DEADLINE`` for
a per-try timeout, ``START_WINDOW_MISSED`` when the operator's ``start_by`` is the earlier limit);
``policy.startup_deadline`` ends a run-stage decision that is still STARTING.
"""

from __future__ import annotations

from airflow_provider_gang.reservation import reserving, running
from airflow_provider_gang.reservation.observed import Observed, Stage
from airflow_provider_gang.reservation.outcome import Decision, Policy
from airflow_provider_gang.reservation.phases import Phase, Reason

__all__ = ["Decision", "Observed", "Policy", "Stage", "decide"]


def decide(observed: Observed, *, now: float, policy: Policy) -> Decision:
    """Where the gang stands at ``now`` (epoch seconds), by the rules in the module docstring."""
    if observed.stage is Stage.RESERVATION:
        decision = reserving.decide_reservation(observed)
    else:
        decision = running.decide_run(observed)
    if decision.terminal:
        return decision
    waited = max(0.0, now - observed.started_at)
    if policy.deadline is not None and now >= policy.deadline:
        limit = "start window (start_by)" if policy.deadline_reason is Reason.START_WINDOW_MISSED else "deadline"
        return Decision(
            phase=Phase.FAILED,
            terminal=True,
            reason=policy.deadline_reason,
            message=f"{limit} reached after {waited:.0f}s of waiting; last state: {decision.message}",
            admitted_count=decision.admitted_count,
            members=decision.members,
        )
    if decision.phase is Phase.STARTING and policy.startup_deadline is not None and now >= policy.startup_deadline:
        return Decision(
            phase=Phase.FAILED,
            terminal=True,
            reason=Reason.DEADLINE,
            message=f"members did not all start within the startup timeout ({waited:.0f}s); {decision.message}",
            members=decision.members,
        )
    return decision

"""decide() against its deadlines: reservation, start window, startup and run."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import decision
from airflow_provider_gang.reservation.decision import Policy
from airflow_provider_gang.reservation.phases import Phase, Reason
from tests.builders import T0, member, provreq
from tests.unit.reservation.observations import reservation_stage, run_stage

WAITING = reservation_stage("provisioning_request", request=provreq().accepted().not_provisioned().obj())
GRANTED = reservation_stage("provisioning_request", request=provreq().provisioned().obj())
STARTING = run_stage("provisioning_request", member(0).running(), member(1), member(2))
RUNNING = run_stage("provisioning_request", member(0).running(), member(1).running(), member(2).running())

DEADLINE_CASES = [
    ("before-deadline", WAITING, T0 + 99, Policy(deadline=T0 + 100), Phase.PENDING, Reason.WAITING_FOR_CAPACITY),
    ("at-deadline", WAITING, T0 + 100, Policy(deadline=T0 + 100), Phase.FAILED, Reason.DEADLINE),
    (
        "start-window",
        WAITING,
        T0 + 100,
        Policy(deadline=T0 + 50, deadline_reason=Reason.START_WINDOW_MISSED),
        Phase.FAILED,
        Reason.START_WINDOW_MISSED,
    ),
    ("success-at-deadline-wins", GRANTED, T0 + 100, Policy(deadline=T0 + 100), Phase.RESERVED, Reason.RESERVED),
    ("startup-deadline", STARTING, T0 + 30, Policy(startup_deadline=T0 + 30), Phase.FAILED, Reason.DEADLINE),
    (
        "startup-deadline-not-yet",
        STARTING,
        T0 + 29,
        Policy(startup_deadline=T0 + 30),
        Phase.STARTING,
        Reason.MEMBERS_STARTING,
    ),
    (
        "startup-deadline-ignored-once-running",
        RUNNING,
        T0 + 31,
        Policy(startup_deadline=T0 + 30),
        Phase.RUNNING,
        Reason.MEMBERS_RUNNING,
    ),
    ("run-deadline", RUNNING, T0 + 500, Policy(deadline=T0 + 400), Phase.FAILED, Reason.DEADLINE),
]


@pytest.mark.parametrize(
    ("observed", "now", "policy", "phase", "reason"),
    [c[1:] for c in DEADLINE_CASES],
    ids=[c[0] for c in DEADLINE_CASES],
)
def test_deadlines(observed, now, policy, phase, reason):
    result = decision.decide(observed, now=now, policy=policy)
    assert (result.phase, result.reason) == (phase, reason)


def test_deadline_message_keeps_last_state():
    result = decision.decide(WAITING, now=T0 + 120, policy=Policy(deadline=T0 + 100))
    assert result.message.startswith("deadline reached after 120s of waiting; last state: ProvisioningRequest")
    window = decision.decide(
        WAITING, now=T0 + 120, policy=Policy(deadline=T0, deadline_reason=Reason.START_WINDOW_MISSED)
    )
    assert window.message.startswith("start window (start_by) reached")

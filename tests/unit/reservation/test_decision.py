"""decide(): one table per stage and mode, then deadlines."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import decision
from airflow_provider_gang.reservation.decision import Observed, Policy, Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import ReservationMode
from tests.builders import T0, member, provreq
from tests.builders import workload as wl

GATE = "airflow-gang.io/gang-t1-abc"
NO_LIMIT = Policy()


def _reserve(mode, *, request=None, workload=None, pods=(), size=3):
    return Observed(
        mode=ReservationMode(mode),
        stage=Stage.RESERVATION,
        size=size,
        started_at=T0,
        provisioning_request=request,
        workload=workload,
        pods=[p.obj() for p in pods],
        scheduling_gate=GATE if mode == "gates" else None,
    )


def _gated(size=3):
    return [member(rank).gated(GATE) for rank in range(size)]


RESERVATION_CASES = [
    # provisioning_request mode
    ("pr-gone", _reserve("provisioning_request"), Phase.FAILED, Reason.RESERVATION_GONE),
    (
        "pr-not-handled",
        _reserve("provisioning_request", request=provreq().obj()),
        Phase.PENDING,
        Reason.NOT_HANDLED_YET,
    ),
    (
        "pr-accepted",
        _reserve("provisioning_request", request=provreq().accepted().not_provisioned().obj()),
        Phase.PENDING,
        Reason.WAITING_FOR_CAPACITY,
    ),
    (
        "pr-provisioned",
        _reserve("provisioning_request", request=provreq().accepted().provisioned().obj()),
        Phase.RESERVED,
        Reason.RESERVED,
    ),
    (
        "pr-booking-consumed",
        _reserve(
            "provisioning_request", request=provreq().provisioned().booking_expired("CapacityBookingConsumed").obj()
        ),
        Phase.RESERVED,
        Reason.RESERVED,
    ),
    (
        "pr-booking-expired",
        _reserve("provisioning_request", request=provreq().provisioned().booking_expired().obj()),
        Phase.FAILED,
        Reason.BOOKING_EXPIRED,
    ),
    (
        "pr-revoked",
        _reserve("provisioning_request", request=provreq().provisioned().revoked().obj()),
        Phase.FAILED,
        Reason.CAPACITY_REVOKED,
    ),
    (
        "pr-failed-capacity-not-found",
        _reserve("provisioning_request", request=provreq().failed("CapacityIsNotFound").obj()),
        Phase.FAILED,
        Reason.CAPACITY_NOT_FOUND,
    ),
    (
        "pr-failed-expired",
        _reserve("provisioning_request", request=provreq().failed("Expired").obj()),
        Phase.FAILED,
        Reason.PROVISIONING_FAILED,
    ),
    (
        "pr-failed-templates-missing",
        _reserve("provisioning_request", request=provreq().failed("FailedToCreatePods").obj()),
        Phase.FAILED,
        Reason.PROVISIONING_FAILED,
    ),
    # gates mode
    (
        "gates-provisioned-all-gated",
        _reserve("gates", request=provreq().provisioned().obj(), pods=_gated()),
        Phase.RESERVED,
        Reason.RESERVED,
    ),
    (
        "gates-waiting-all-gated",
        _reserve("gates", request=provreq().accepted().obj(), pods=_gated()),
        Phase.PENDING,
        Reason.WAITING_FOR_CAPACITY,
    ),
    (
        "gates-member-missing-outranks-provisioned",
        _reserve("gates", request=provreq().provisioned().obj(), pods=_gated(2)),
        Phase.FAILED,
        Reason.MEMBER_LOST,
    ),
    (
        "gates-member-missing-while-waiting",
        _reserve("gates", request=provreq().accepted().obj(), pods=_gated(1)),
        Phase.FAILED,
        Reason.MEMBER_LOST,
    ),
    (
        "gates-request-failed",
        _reserve("gates", request=provreq().failed().obj(), pods=_gated()),
        Phase.FAILED,
        Reason.PROVISIONING_FAILED,
    ),
    (
        "gates-adopted-after-release",
        _reserve("gates", request=provreq().provisioned().obj(), pods=[member(r).bound() for r in range(3)]),
        Phase.RESERVED,
        Reason.RESERVED,
    ),
    # kueue mode
    ("kueue-workload-not-created", _reserve("kueue"), Phase.PENDING, Reason.WAITING_FOR_OBJECTS),
    (
        "kueue-pending",
        _reserve("kueue", workload=wl(3).waiting_for_quota().obj()),
        Phase.PENDING,
        Reason.WAITING_FOR_QUOTA,
    ),
    (
        "kueue-quota-reserved",
        _reserve("kueue", workload=wl(3).quota_reserved().check("prov", "Pending").obj()),
        Phase.PENDING,
        Reason.WAITING_FOR_ADMISSION_CHECKS,
    ),
    ("kueue-admitted", _reserve("kueue", workload=wl(3).admitted().obj()), Phase.RESERVED, Reason.RESERVED),
    (
        "kueue-retry",
        _reserve("kueue", workload=wl(3).quota_reserved().check("prov", "Retry").obj()),
        Phase.FAILED,
        Reason.KUEUE_RETRY,
    ),
    (
        "kueue-rejected",
        _reserve("kueue", workload=wl(3).check("prov", "Rejected").obj()),
        Phase.FAILED,
        Reason.KUEUE_REJECTED,
    ),
    ("kueue-preempted", _reserve("kueue", workload=wl(3).admitted().preempted().obj()), Phase.FAILED, Reason.PREEMPTED),
    ("kueue-evicted", _reserve("kueue", workload=wl(3).admitted().evicted().obj()), Phase.FAILED, Reason.EVICTED),
    ("kueue-inactive", _reserve("kueue", workload=wl(3).inactive().obj()), Phase.FAILED, Reason.WORKLOAD_DEACTIVATED),
    (
        "kueue-finished",
        _reserve("kueue", workload=wl(3).finished("Failed").obj()),
        Phase.FAILED,
        Reason.WORKLOAD_FINISHED,
    ),
]


@pytest.mark.parametrize(
    ("observed", "phase", "reason"), [c[1:] for c in RESERVATION_CASES], ids=[c[0] for c in RESERVATION_CASES]
)
def test_reservation_stage(observed, phase, reason):
    result = decision.decide(observed, now=T0 + 1, policy=NO_LIMIT)
    assert (result.phase, result.reason) == (phase, reason)
    assert result.terminal is (phase in (Phase.RESERVED, Phase.FAILED))
    assert result.message


def test_messages_quote_upstream():
    observed = _reserve("provisioning_request", request=provreq("gang-x").failed("OutOfResources", "pool max").obj())
    assert decision.decide(observed, now=T0, policy=NO_LIMIT).message == (
        "ProvisioningRequest gang-x failed (OutOfResources: pool max)"
    )
    pods = [member(0).gated(GATE), member(2).gated(GATE)]
    gated = _reserve("gates", request=provreq().provisioned().obj(), pods=pods)
    assert "rank [1]" in decision.decide(gated, now=T0, policy=NO_LIMIT).message


def test_kueue_partial_admission_reports_admitted_count():
    observed = _reserve("kueue", workload=wl(8).admitted(count=5).obj(), size=8)
    result = decision.decide(observed, now=T0, policy=NO_LIMIT)
    assert (result.phase, result.admitted_count) == (Phase.RESERVED, 5)
    assert "partially: 5 of 8 members" in result.message


def test_full_admission_and_provisioned_report_size():
    assert (
        decision.decide(_reserve("kueue", workload=wl(3).admitted().obj()), now=T0, policy=NO_LIMIT).admitted_count == 3
    )
    pr = _reserve("provisioning_request", request=provreq().provisioned().obj())
    assert decision.decide(pr, now=T0, policy=NO_LIMIT).admitted_count == 3


def test_gates_mode_requires_the_gate_name():
    observed = Observed(
        mode=ReservationMode.GATES,
        stage=Stage.RESERVATION,
        size=1,
        started_at=T0,
        provisioning_request=provreq().provisioned().obj(),
    )
    with pytest.raises(ValueError, match="scheduling_gate"):
        decision.decide(observed, now=T0, policy=NO_LIMIT)


def _run(mode="provisioning_request", *pods, request=None, workload=None, size=3, from_job=False):
    return Observed(
        mode=ReservationMode(mode),
        stage=Stage.RUN,
        size=size,
        started_at=T0,
        provisioning_request=request,
        workload=workload,
        pods=[p.obj() for p in pods],
        pods_from_job=from_job,
    )


RUN_CASES = [
    (
        "starting",
        _run("provisioning_request", member(0), member(1).running(), member(2)),
        Phase.STARTING,
        Reason.MEMBERS_STARTING,
    ),
    (
        "running",
        _run("gates", member(0).running(), member(1).running(), member(2).succeeded()),
        Phase.RUNNING,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "succeeded",
        _run("kueue", member(0).succeeded(), member(1).succeeded(), member(2).succeeded()),
        Phase.SUCCEEDED,
        Reason.ALL_SUCCEEDED,
    ),
    (
        "member-failed",
        _run("provisioning_request", member(0).running(), member(1).failed(137, "OOMKilled"), member(2).running()),
        Phase.FAILED,
        Reason.MEMBER_FAILED,
    ),
    ("member-lost", _run("provisioning_request", member(0).running(), member(1).running()),
     Phase.FAILED, Reason.MEMBER_LOST),
    (
        "job-pods-not-created-yet",
        _run("kueue", member(0).running(), from_job=True),
        Phase.STARTING,
        Reason.MEMBERS_STARTING,
    ),
    (
        "capacity-revoked-ends-run",
        _run(
            "provisioning_request",
            member(0).running(),
            member(1).running(),
            member(2).running(),
            request=provreq().provisioned().revoked().obj(),
        ),
        Phase.FAILED,
        Reason.CAPACITY_REVOKED,
    ),
    (
        "booking-expired-after-launch-is-fine",
        _run(
            "provisioning_request",
            member(0).running(),
            member(1).running(),
            member(2).running(),
            request=provreq().provisioned().booking_expired().obj(),
        ),
        Phase.RUNNING,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "request-deleted-after-launch-is-fine",
        _run("gates", member(0).running(), member(1).running(), member(2).running()),
        Phase.RUNNING,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "workload-preempted-ends-run",
        _run("kueue", member(0).running(), workload=wl(3).admitted().preempted().obj()),
        Phase.FAILED,
        Reason.PREEMPTED,
    ),
    (
        "workload-evicted-ends-run",
        _run("kueue", member(0).running(), workload=wl(3).admitted().evicted().obj()),
        Phase.FAILED,
        Reason.EVICTED,
    ),
    (
        "workload-admitted-pods-decide",
        _run("kueue", member(0).running(), member(1).running(), member(2).running(), workload=wl(3).admitted().obj()),
        Phase.RUNNING,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "workload-finished-pods-decide",
        _run(
            "kueue",
            member(0).succeeded(),
            member(1).succeeded(),
            member(2).succeeded(),
            workload=wl(3).admitted().finished().obj(),
        ),
        Phase.SUCCEEDED,
        Reason.ALL_SUCCEEDED,
    ),
]


@pytest.mark.parametrize(("observed", "phase", "reason"), [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES])
def test_run_stage(observed, phase, reason):
    result = decision.decide(observed, now=T0 + 1, policy=NO_LIMIT)
    assert (result.phase, result.reason) == (phase, reason)
    assert result.terminal is (phase in (Phase.SUCCEEDED, Phase.FAILED))
    assert len(result.members) == observed.size


def test_run_failure_names_rank_exit_code_and_reason():
    pods = (member(0).running(), member(1).failed(137, "OOMKilled"), member(2).running())
    observed = _run("provisioning_request", *pods)
    result = decision.decide(observed, now=T0, policy=NO_LIMIT)
    assert result.message == "1 of 3 failed: rank 1 (gang-t1-abc-1) failed, exit code 137, OOMKilled"
    event = result.as_event()
    assert event["reason"] == "member_failed" and event["members"][1]["exit_code"] == 137
    lost = decision.decide(_run("provisioning_request", member(0).running()), now=T0, policy=NO_LIMIT)
    assert lost.message.startswith("2 of 3 lost: rank 1 (no pod) missing")


WAITING = _reserve("provisioning_request", request=provreq().accepted().not_provisioned().obj())
GRANTED = _reserve("provisioning_request", request=provreq().provisioned().obj())
STARTING = _run("provisioning_request", member(0).running(), member(1), member(2))
RUNNING = _run("provisioning_request", member(0).running(), member(1).running(), member(2).running())

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

"""decide() at the reservation stage: one table per mode."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import decision
from airflow_provider_gang.reservation.decision import Observed, Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import ReservationMode
from tests.builders import T0, member, provreq
from tests.builders import workload as wl
from tests.unit.reservation.observations import GATE, NO_LIMIT, gated_pods, reservation_stage

RESERVATION_CASES = [
    # provisioning_request mode
    ("pr-gone", reservation_stage("provisioning_request"), Phase.FAILED, Reason.RESERVATION_GONE),
    (
        "pr-not-handled",
        reservation_stage("provisioning_request", request=provreq().obj()),
        Phase.PENDING,
        Reason.NOT_HANDLED_YET,
    ),
    (
        "pr-accepted",
        reservation_stage("provisioning_request", request=provreq().accepted().not_provisioned().obj()),
        Phase.PENDING,
        Reason.WAITING_FOR_CAPACITY,
    ),
    (
        "pr-provisioned",
        reservation_stage("provisioning_request", request=provreq().accepted().provisioned().obj()),
        Phase.RESERVED,
        Reason.RESERVED,
    ),
    (
        "pr-booking-consumed",
        reservation_stage(
            "provisioning_request", request=provreq().provisioned().booking_expired("CapacityBookingConsumed").obj()
        ),
        Phase.RESERVED,
        Reason.RESERVED,
    ),
    (
        "pr-booking-expired",
        reservation_stage("provisioning_request", request=provreq().provisioned().booking_expired().obj()),
        Phase.FAILED,
        Reason.BOOKING_EXPIRED,
    ),
    (
        "pr-revoked",
        reservation_stage("provisioning_request", request=provreq().provisioned().revoked().obj()),
        Phase.FAILED,
        Reason.CAPACITY_REVOKED,
    ),
    (
        "pr-failed-capacity-not-found",
        reservation_stage("provisioning_request", request=provreq().failed("CapacityIsNotFound").obj()),
        Phase.FAILED,
        Reason.CAPACITY_NOT_FOUND,
    ),
    (
        "pr-failed-expired",
        reservation_stage("provisioning_request", request=provreq().failed("Expired").obj()),
        Phase.FAILED,
        Reason.PROVISIONING_FAILED,
    ),
    (
        "pr-failed-templates-missing",
        reservation_stage("provisioning_request", request=provreq().failed("FailedToCreatePods").obj()),
        Phase.FAILED,
        Reason.PROVISIONING_FAILED,
    ),
    # gates mode
    (
        "gates-provisioned-all-gated",
        reservation_stage("gates", request=provreq().provisioned().obj(), pods=gated_pods()),
        Phase.RESERVED,
        Reason.RESERVED,
    ),
    (
        "gates-waiting-all-gated",
        reservation_stage("gates", request=provreq().accepted().obj(), pods=gated_pods()),
        Phase.PENDING,
        Reason.WAITING_FOR_CAPACITY,
    ),
    (
        "gates-member-missing-outranks-provisioned",
        reservation_stage("gates", request=provreq().provisioned().obj(), pods=gated_pods(2)),
        Phase.FAILED,
        Reason.MEMBER_LOST,
    ),
    (
        "gates-member-missing-while-waiting",
        reservation_stage("gates", request=provreq().accepted().obj(), pods=gated_pods(1)),
        Phase.FAILED,
        Reason.MEMBER_LOST,
    ),
    (
        "gates-request-failed",
        reservation_stage("gates", request=provreq().failed().obj(), pods=gated_pods()),
        Phase.FAILED,
        Reason.PROVISIONING_FAILED,
    ),
    (
        "gates-adopted-after-release",
        reservation_stage("gates", request=provreq().provisioned().obj(), pods=[member(r).bound() for r in range(3)]),
        Phase.RESERVED,
        Reason.RESERVED,
    ),
    # kueue mode
    ("kueue-workload-not-created", reservation_stage("kueue"), Phase.PENDING, Reason.WAITING_FOR_OBJECTS),
    (
        "kueue-pending",
        reservation_stage("kueue", workload=wl(3).waiting_for_quota().obj()),
        Phase.PENDING,
        Reason.WAITING_FOR_QUOTA,
    ),
    (
        "kueue-quota-reserved",
        reservation_stage("kueue", workload=wl(3).quota_reserved().check("prov", "Pending").obj()),
        Phase.PENDING,
        Reason.WAITING_FOR_ADMISSION_CHECKS,
    ),
    ("kueue-admitted", reservation_stage("kueue", workload=wl(3).admitted().obj()), Phase.RESERVED, Reason.RESERVED),
    (
        "kueue-retry",
        reservation_stage("kueue", workload=wl(3).quota_reserved().check("prov", "Retry").obj()),
        Phase.FAILED,
        Reason.KUEUE_RETRY,
    ),
    (
        "kueue-rejected",
        reservation_stage("kueue", workload=wl(3).check("prov", "Rejected").obj()),
        Phase.FAILED,
        Reason.KUEUE_REJECTED,
    ),
    (
        "kueue-preempted",
        reservation_stage("kueue", workload=wl(3).admitted().preempted().obj()),
        Phase.FAILED,
        Reason.PREEMPTED,
    ),
    (
        "kueue-evicted",
        reservation_stage("kueue", workload=wl(3).admitted().evicted().obj()),
        Phase.FAILED,
        Reason.EVICTED,
    ),
    (
        "kueue-inactive",
        reservation_stage("kueue", workload=wl(3).inactive().obj()),
        Phase.FAILED,
        Reason.WORKLOAD_DEACTIVATED,
    ),
    (
        "kueue-finished",
        reservation_stage("kueue", workload=wl(3).finished("Failed").obj()),
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
    observed = reservation_stage(
        "provisioning_request", request=provreq("gang-x").failed("OutOfResources", "pool max").obj()
    )
    assert decision.decide(observed, now=T0, policy=NO_LIMIT).message == (
        "ProvisioningRequest gang-x failed (OutOfResources: pool max)"
    )
    pods = [member(0).gated(GATE), member(2).gated(GATE)]
    gated = reservation_stage("gates", request=provreq().provisioned().obj(), pods=pods)
    assert "rank [1]" in decision.decide(gated, now=T0, policy=NO_LIMIT).message


def test_kueue_partial_admission_reports_admitted_count():
    observed = reservation_stage("kueue", workload=wl(8).admitted(count=5).obj(), size=8)
    result = decision.decide(observed, now=T0, policy=NO_LIMIT)
    assert (result.phase, result.admitted_count) == (Phase.RESERVED, 5)
    assert "partially: 5 of 8 members" in result.message


def test_full_admission_and_provisioned_report_size():
    assert (
        decision.decide(
            reservation_stage("kueue", workload=wl(3).admitted().obj()), now=T0, policy=NO_LIMIT
        ).admitted_count
        == 3
    )
    pr = reservation_stage("provisioning_request", request=provreq().provisioned().obj())
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


def test_a_deleted_request_is_said_without_a_name_it_no_longer_has():
    outcome = decision.decide(reservation_stage("provisioning_request"), now=T0 + 1, policy=NO_LIMIT)
    assert outcome.message == "The gang's ProvisioningRequest was deleted before it was granted"

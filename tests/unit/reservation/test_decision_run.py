"""decide() at the run stage: one table per mode, and what a failure names."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import decision
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.records.events import EventTimings, GangEvent
from tests.builders import T0, member, provreq
from tests.builders import workload as wl
from tests.unit.reservation.observations import NO_LIMIT, run_stage

RUN_CASES = [
    (
        "starting",
        run_stage("provisioning_request", member(0), member(1).running(), member(2)),
        Phase.STARTING,
        Reason.MEMBERS_STARTING,
    ),
    (
        "running",
        run_stage("gates", member(0).running(), member(1).running(), member(2).succeeded()),
        Phase.RUNNING,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "succeeded",
        run_stage("kueue", member(0).succeeded(), member(1).succeeded(), member(2).succeeded()),
        Phase.SUCCEEDED,
        Reason.ALL_SUCCEEDED,
    ),
    (
        "member-failed",
        run_stage("provisioning_request", member(0).running(), member(1).failed(137, "OOMKilled"), member(2).running()),
        Phase.FAILED,
        Reason.MEMBER_FAILED,
    ),
    (
        "member-lost",
        run_stage("provisioning_request", member(0).running(), member(1).running()),
        Phase.FAILED,
        Reason.MEMBER_LOST,
    ),
    (
        "job-pods-not-created-yet",
        run_stage("kueue", member(0).running(), from_job=True),
        Phase.STARTING,
        Reason.MEMBERS_STARTING,
    ),
    (
        "capacity-revoked-ends-run",
        run_stage(
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
        run_stage(
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
        run_stage("gates", member(0).running(), member(1).running(), member(2).running()),
        Phase.RUNNING,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "workload-preempted-ends-run",
        run_stage("kueue", member(0).running(), workload=wl(3).admitted().preempted().obj()),
        Phase.FAILED,
        Reason.PREEMPTED,
    ),
    (
        "workload-evicted-ends-run",
        run_stage("kueue", member(0).running(), workload=wl(3).admitted().evicted().obj()),
        Phase.FAILED,
        Reason.EVICTED,
    ),
    (
        "workload-admitted-pods-decide",
        run_stage(
            "kueue", member(0).running(), member(1).running(), member(2).running(), workload=wl(3).admitted().obj()
        ),
        Phase.RUNNING,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "workload-finished-pods-decide",
        run_stage(
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
    observed = run_stage("provisioning_request", *pods)
    result = decision.decide(observed, now=T0, policy=NO_LIMIT)
    assert result.message == "1 of 3 failed: rank 1 (gang-t1-abc-1) failed, exit code 137, OOMKilled"
    timings = EventTimings(started_at=T0, event_at=T0, waited_seconds=0.0)
    event = GangEvent.of_decision(
        result, stage=Stage.RUN, gang_name="gang-t1-abc", namespace="default", mode=observed.mode, timings=timings
    ).to_dict()
    assert event["reason"] == "member_failed" and event["members"][1]["exit_code"] == 137
    lost = decision.decide(run_stage("provisioning_request", member(0).running()), now=T0, policy=NO_LIMIT)
    assert lost.message.startswith("2 of 3 lost: rank 1 (no pod) missing")

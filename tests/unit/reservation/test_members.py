"""Member pods: rank, per-member state, gated pods and the running gang, table-driven."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import members
from airflow_provider_gang.reservation.members import GangState, GateState, MemberState
from tests.builders import T0, member

GATE = "airflow-gang.io/gang-t1-abc"

RANK_CASES = [
    ("our-label", member(3).obj(), 3),
    ("job-index-label", member(None).job_index(2).obj(), 2),
    ("job-index-annotation", member(None).job_index(5, "annotations").obj(), 5),
    ("no-rank", member(None).obj(), None),
    ("non-numeric", {"metadata": {"labels": {members.RANK_LABEL: "x"}}}, None),
    ("no-metadata", {}, None),
]


@pytest.mark.parametrize(("pod_object", "expected"), [c[1:] for c in RANK_CASES], ids=[c[0] for c in RANK_CASES])
def test_member_rank(pod_object, expected):
    assert members.member_rank(pod_object) == expected


STATE_CASES = [
    ("pending", member().obj(), MemberState.PENDING, None, ""),
    ("no-status", {"metadata": {"name": "p"}}, MemberState.PENDING, None, ""),
    ("running", member().running().obj(), MemberState.RUNNING, None, ""),
    ("succeeded", member().succeeded().obj(), MemberState.SUCCEEDED, 0, ""),
    ("failed-exit-code", member().failed(3).obj(), MemberState.FAILED, 3, "Error"),
    ("oom-killed", member().failed(137, "OOMKilled").obj(), MemberState.FAILED, 137, "OOMKilled"),
    (
        "failed-no-container-status",
        member().phase("Failed", "DeadlineExceeded", "too slow").obj(),
        MemberState.FAILED,
        None,
        "DeadlineExceeded",
    ),
    ("failed-no-reason", member().phase("Failed").obj(), MemberState.FAILED, None, "Failed"),
    ("running-but-container-failed", member().running().terminated(2).obj(), MemberState.FAILED, 2, "Failed"),
    ("running-container-exit-zero", member().running().terminated(0).obj(), MemberState.RUNNING, None, ""),
    ("invalid-image", member().waiting("InvalidImageName").obj(), MemberState.FAILED, None, "InvalidImageName"),
    ("image-pull-backoff-keeps-waiting", member().waiting("ImagePullBackOff").obj(), MemberState.PENDING, None, ""),
    (
        "evicted",
        member().running().phase("Failed", "Evicted", "node low on memory").obj(),
        MemberState.LOST,
        None,
        "Evicted",
    ),
    ("node-lost-unknown-phase", member().running().phase("Unknown").obj(), MemberState.LOST, None, "NodeLost"),
    ("terminating", member().running().terminating().obj(), MemberState.LOST, None, "Deleted"),
    ("terminating-after-success", member().succeeded().terminating().obj(), MemberState.SUCCEEDED, 0, ""),
    (
        "disruption-target",
        member().running().condition("DisruptionTarget", reason="PreemptionByScheduler").obj(),
        MemberState.LOST,
        None,
        "PreemptionByScheduler",
    ),
    (
        "disruption-target-no-reason",
        member().running().condition("DisruptionTarget").obj(),
        MemberState.LOST,
        None,
        "DisruptionTarget",
    ),
]


@pytest.mark.parametrize(
    ("pod_object", "state", "exit_code", "reason"), [c[1:] for c in STATE_CASES], ids=[c[0] for c in STATE_CASES]
)
def test_member_status(pod_object, state, exit_code, reason):
    status = members.member_status(pod_object, 0)
    assert (status.state, status.exit_code, status.reason) == (state, exit_code, reason)


def test_member_status_times_and_description():
    status = members.member_status(member(1).failed(137, "OOMKilled", at=50).obj(), 1)
    assert status.started_at == T0 and status.finished_at == T0 + 50
    assert status.node == "node-1" and status.pod_name == "gang-t1-abc-1"
    assert status.describe() == "rank 1 (gang-t1-abc-1) failed, exit code 137, OOMKilled"
    lost = members.member_status(member(2).phase("Failed", "Evicted", "low memory").obj(), 2)
    assert lost.describe() == "rank 2 (gang-t1-abc-2) lost, Evicted, low memory"
    assert members.MemberStatus(rank=4, state=MemberState.MISSING).describe() == "rank 4 (no pod) missing"


def test_finished_at_ignores_unparseable_times():
    obj = member().running().obj()
    obj["status"]["containerStatuses"] = [{"state": {"terminated": {"exitCode": 0, "finishedAt": "not-a-time"}}}]
    assert members.member_status(obj, 0).finished_at is None


def _gang(*pods, size=3, missing_is_lost=True):
    return members.classify_running_gang([p.obj() for p in pods], size=size, missing_is_lost=missing_is_lost)


GANG_CASES = [
    ("all-pending", lambda: _gang(member(0), member(1), member(2)), GangState.STARTING),
    ("some-running", lambda: _gang(member(0).running(), member(1), member(2).running()), GangState.STARTING),
    ("all-running", lambda: _gang(member(0).running(), member(1).running(), member(2).running()), GangState.RUNNING),
    (
        "running-and-done",
        lambda: _gang(member(0).succeeded(), member(1).running(), member(2).running()),
        GangState.RUNNING,
    ),
    (
        "all-succeeded",
        lambda: _gang(member(0).succeeded(), member(1).succeeded(), member(2).succeeded()),
        GangState.SUCCEEDED,
    ),
    (
        "one-failed",
        lambda: _gang(member(0).running(), member(1).failed(), member(2).running()),
        GangState.MEMBER_FAILED,
    ),
    (
        "failed-outranks-lost",
        lambda: _gang(member(0).phase("Failed", "Evicted"), member(1).failed(), member(2)),
        GangState.MEMBER_FAILED,
    ),
    (
        "one-evicted",
        lambda: _gang(member(0).running(), member(1).running(), member(2).phase("Failed", "Evicted")),
        GangState.MEMBER_LOST,
    ),
    ("one-missing", lambda: _gang(member(0).running(), member(1).running()), GangState.MEMBER_LOST),
    ("missing-from-job-is-starting", lambda: _gang(member(0).running(), missing_is_lost=False), GangState.STARTING),
    (
        "replaced-pod-worst-wins",
        lambda: _gang(
            member(0).running(), member(1).running(), member(2).running(), member(2).phase("Failed", "Evicted")
        ),
        GangState.MEMBER_LOST,
    ),
    (
        "replacement-order-does-not-matter",
        lambda: _gang(
            member(0).running(), member(1).running(), member(2).phase("Failed", "Evicted"), member(2).running()
        ),
        GangState.MEMBER_LOST,
    ),
    (
        "pods-without-rank-ignored",
        lambda: _gang(member(0).running(), member(1).running(), member(2).running(), member(None).failed()),
        GangState.RUNNING,
    ),
    (
        "rank-beyond-size-ignored",
        lambda: _gang(member(0).running(), member(1).running(), member(2).running(), member(7).failed()),
        GangState.RUNNING,
    ),
]


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in GANG_CASES], ids=[c[0] for c in GANG_CASES])
def test_classify_running_gang(build, expected):
    assert build().state is expected


def test_running_gang_reports_every_rank_in_order():
    gang = _gang(member(2).failed(9), member(0).running())
    assert [member.rank for member in gang.members] == [0, 1, 2]
    assert [member.state for member in gang.members] == [MemberState.RUNNING, MemberState.MISSING, MemberState.FAILED]
    assert [m.rank for m in gang.in_state(MemberState.FAILED, MemberState.MISSING)] == [1, 2]


def _gated(*pods, size=3):
    return members.classify_gated_pods([p.obj() for p in pods], size=size, gate=GATE)


GATED_CASES = [
    ("all-gated", lambda: _gated(member(0).gated(GATE), member(1).gated(GATE), member(2).gated(GATE)), GateState.GATED),
    ("one-missing", lambda: _gated(member(0).gated(GATE), member(1).gated(GATE)), GateState.MISSING_MEMBERS),
    (
        "one-terminating",
        lambda: _gated(member(0).gated(GATE), member(1).gated(GATE), member(2).gated(GATE).terminating()),
        GateState.MISSING_MEMBERS,
    ),
    (
        "no-rank-does-not-count",
        lambda: _gated(member(0).gated(GATE), member(1).gated(GATE), member(None).gated(GATE)),
        GateState.MISSING_MEMBERS,
    ),
    (
        "rank-beyond-size",
        lambda: _gated(member(0).gated(GATE), member(1).gated(GATE), member(3).gated(GATE)),
        GateState.MISSING_MEMBERS,
    ),
    (
        "other-gate-only",
        lambda: _gated(member(0).gated("kueue.x-k8s.io/admission"), member(1), member(2)),
        GateState.RELEASED,
    ),
    (
        "partly-released",
        lambda: _gated(member(0).gated(GATE), member(1), member(2).gated(GATE)),
        GateState.PARTLY_RELEASED,
    ),
    ("released", lambda: _gated(member(0).bound(), member(1), member(2)), GateState.RELEASED),
    ("bound", lambda: _gated(member(0).bound(), member(1).bound(), member(2).bound()), GateState.BOUND),
]


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in GATED_CASES], ids=[c[0] for c in GATED_CASES])
def test_classify_gated_pods(build, expected):
    assert build() is expected

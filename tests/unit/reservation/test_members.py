"""Member pods: rank, per-member state, gated pods and the running gang, table-driven."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import members
from airflow_provider_gang.reservation.members import GangState, GateState, MemberState

from .builders import T0, pod

GATE = "airflow-gang.io/gang-t1-abc"

RANK_CASES = [
    ("our-label", pod(3).obj(), 3),
    ("job-index-label", pod(None).job_index(2).obj(), 2),
    ("job-index-annotation", pod(None).job_index(5, "annotations").obj(), 5),
    ("no-rank", pod(None).obj(), None),
    ("non-numeric", {"metadata": {"labels": {members.RANK_LABEL: "x"}}}, None),
    ("no-metadata", {}, None),
]


@pytest.mark.parametrize(("pod_object", "expected"), [c[1:] for c in RANK_CASES], ids=[c[0] for c in RANK_CASES])
def test_member_rank(pod_object, expected):
    assert members.member_rank(pod_object) == expected


STATE_CASES = [
    ("pending", pod().obj(), MemberState.PENDING, None, ""),
    ("no-status", {"metadata": {"name": "p"}}, MemberState.PENDING, None, ""),
    ("running", pod().running().obj(), MemberState.RUNNING, None, ""),
    ("succeeded", pod().succeeded().obj(), MemberState.SUCCEEDED, 0, ""),
    ("failed-exit-code", pod().failed(3).obj(), MemberState.FAILED, 3, "Error"),
    ("oom-killed", pod().failed(137, "OOMKilled").obj(), MemberState.FAILED, 137, "OOMKilled"),
    (
        "failed-no-container-status",
        pod().phase("Failed", "DeadlineExceeded", "too slow").obj(),
        MemberState.FAILED,
        None,
        "DeadlineExceeded",
    ),
    ("failed-no-reason", pod().phase("Failed").obj(), MemberState.FAILED, None, "Failed"),
    ("running-but-container-failed", pod().running().terminated(2).obj(), MemberState.FAILED, 2, "Failed"),
    ("running-container-exit-zero", pod().running().terminated(0).obj(), MemberState.RUNNING, None, ""),
    ("invalid-image", pod().waiting("InvalidImageName").obj(), MemberState.FAILED, None, "InvalidImageName"),
    ("image-pull-backoff-keeps-waiting", pod().waiting("ImagePullBackOff").obj(), MemberState.PENDING, None, ""),
    (
        "evicted",
        pod().running().phase("Failed", "Evicted", "node low on memory").obj(),
        MemberState.LOST,
        None,
        "Evicted",
    ),
    ("node-lost-unknown-phase", pod().running().phase("Unknown").obj(), MemberState.LOST, None, "NodeLost"),
    ("terminating", pod().running().terminating().obj(), MemberState.LOST, None, "Deleted"),
    ("terminating-after-success", pod().succeeded().terminating().obj(), MemberState.SUCCEEDED, 0, ""),
    (
        "disruption-target",
        pod().running().condition("DisruptionTarget", reason="PreemptionByScheduler").obj(),
        MemberState.LOST,
        None,
        "PreemptionByScheduler",
    ),
    (
        "disruption-target-no-reason",
        pod().running().condition("DisruptionTarget").obj(),
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
    status = members.member_status(pod(1).failed(137, "OOMKilled", at=50).obj(), 1)
    assert status.started_at == T0 and status.finished_at == T0 + 50
    assert status.node == "node-1" and status.pod_name == "gang-t1-abc-1"
    assert status.describe() == "rank 1 (gang-t1-abc-1) failed, exit code 137, OOMKilled"
    lost = members.member_status(pod(2).phase("Failed", "Evicted", "low memory").obj(), 2)
    assert lost.describe() == "rank 2 (gang-t1-abc-2) lost, Evicted, low memory"
    assert members.MemberStatus(rank=4, state=MemberState.MISSING).describe() == "rank 4 (no pod) missing"


def test_finished_at_ignores_unparseable_times():
    obj = pod().running().obj()
    obj["status"]["containerStatuses"] = [{"state": {"terminated": {"exitCode": 0, "finishedAt": "not-a-time"}}}]
    assert members.member_status(obj, 0).finished_at is None


def _gang(*pods, size=3, missing_is_lost=True):
    return members.classify_running_gang([p.obj() for p in pods], size=size, missing_is_lost=missing_is_lost)


GANG_CASES = [
    ("all-pending", lambda: _gang(pod(0), pod(1), pod(2)), GangState.STARTING),
    ("some-running", lambda: _gang(pod(0).running(), pod(1), pod(2).running()), GangState.STARTING),
    ("all-running", lambda: _gang(pod(0).running(), pod(1).running(), pod(2).running()), GangState.RUNNING),
    ("running-and-done", lambda: _gang(pod(0).succeeded(), pod(1).running(), pod(2).running()), GangState.RUNNING),
    ("all-succeeded", lambda: _gang(pod(0).succeeded(), pod(1).succeeded(), pod(2).succeeded()), GangState.SUCCEEDED),
    ("one-failed", lambda: _gang(pod(0).running(), pod(1).failed(), pod(2).running()), GangState.MEMBER_FAILED),
    (
        "failed-outranks-lost",
        lambda: _gang(pod(0).phase("Failed", "Evicted"), pod(1).failed(), pod(2)),
        GangState.MEMBER_FAILED,
    ),
    (
        "one-evicted",
        lambda: _gang(pod(0).running(), pod(1).running(), pod(2).phase("Failed", "Evicted")),
        GangState.MEMBER_LOST,
    ),
    ("one-missing", lambda: _gang(pod(0).running(), pod(1).running()), GangState.MEMBER_LOST),
    ("missing-from-job-is-starting", lambda: _gang(pod(0).running(), missing_is_lost=False), GangState.STARTING),
    (
        "replaced-pod-worst-wins",
        lambda: _gang(pod(0).running(), pod(1).running(), pod(2).running(), pod(2).phase("Failed", "Evicted")),
        GangState.MEMBER_LOST,
    ),
    (
        "replacement-order-does-not-matter",
        lambda: _gang(pod(0).running(), pod(1).running(), pod(2).phase("Failed", "Evicted"), pod(2).running()),
        GangState.MEMBER_LOST,
    ),
    (
        "pods-without-rank-ignored",
        lambda: _gang(pod(0).running(), pod(1).running(), pod(2).running(), pod(None).failed()),
        GangState.RUNNING,
    ),
    (
        "rank-beyond-size-ignored",
        lambda: _gang(pod(0).running(), pod(1).running(), pod(2).running(), pod(7).failed()),
        GangState.RUNNING,
    ),
]


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in GANG_CASES], ids=[c[0] for c in GANG_CASES])
def test_classify_running_gang(build, expected):
    assert build().state is expected


def test_running_gang_reports_every_rank_in_order():
    gang = _gang(pod(2).failed(9), pod(0).running())
    assert [member.rank for member in gang.members] == [0, 1, 2]
    assert [member.state for member in gang.members] == [MemberState.RUNNING, MemberState.MISSING, MemberState.FAILED]
    assert [m.rank for m in gang.in_state(MemberState.FAILED, MemberState.MISSING)] == [1, 2]


def _gated(*pods, size=3):
    return members.classify_gated_pods([p.obj() for p in pods], size=size, gate=GATE)


GATED_CASES = [
    ("all-gated", lambda: _gated(pod(0).gated(GATE), pod(1).gated(GATE), pod(2).gated(GATE)), GateState.GATED),
    ("one-missing", lambda: _gated(pod(0).gated(GATE), pod(1).gated(GATE)), GateState.MISSING_MEMBERS),
    (
        "one-terminating",
        lambda: _gated(pod(0).gated(GATE), pod(1).gated(GATE), pod(2).gated(GATE).terminating()),
        GateState.MISSING_MEMBERS,
    ),
    (
        "no-rank-does-not-count",
        lambda: _gated(pod(0).gated(GATE), pod(1).gated(GATE), pod(None).gated(GATE)),
        GateState.MISSING_MEMBERS,
    ),
    (
        "rank-beyond-size",
        lambda: _gated(pod(0).gated(GATE), pod(1).gated(GATE), pod(3).gated(GATE)),
        GateState.MISSING_MEMBERS,
    ),
    ("other-gate-only", lambda: _gated(pod(0).gated("kueue.x-k8s.io/admission"), pod(1), pod(2)), GateState.RELEASED),
    ("partly-released", lambda: _gated(pod(0).gated(GATE), pod(1), pod(2).gated(GATE)), GateState.PARTLY_RELEASED),
    ("released", lambda: _gated(pod(0).bound(), pod(1), pod(2)), GateState.RELEASED),
    ("bound", lambda: _gated(pod(0).bound(), pod(1).bound(), pod(2).bound()), GateState.BOUND),
]


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in GATED_CASES], ids=[c[0] for c in GATED_CASES])
def test_classify_gated_pods(build, expected):
    assert build() is expected

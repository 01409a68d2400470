"""classify_workload: one row per state, and the documented precedence."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import conditions, reserving, workload
from airflow_provider_gang.reservation.workload import WorkloadState
from tests.builders import workload as wl

CASES = [
    ("missing", None, WorkloadState.MISSING),
    ("new", wl().obj(), WorkloadState.PENDING),
    ("waiting-for-quota", wl().waiting_for_quota().obj(), WorkloadState.PENDING),
    ("quota-reserved", wl().quota_reserved().obj(), WorkloadState.QUOTA_RESERVED),
    (
        "quota-reserved-check-pending",
        wl().quota_reserved().check("prov", "Pending", "ETA 5m").obj(),
        WorkloadState.QUOTA_RESERVED,
    ),
    ("admitted", wl().admitted().check("prov", "Ready").obj(), WorkloadState.ADMITTED),
    ("admitted-beside-a-pending-check", wl().admitted().check("prov", "Pending").obj(), WorkloadState.QUOTA_RESERVED),
    ("admitted-beside-a-rejected-check", wl().admitted().check("prov", "Rejected").obj(), WorkloadState.REJECTED),
    ("admitted-beside-a-retry-check", wl().admitted().check("prov", "Retry").obj(), WorkloadState.RETRY),
    ("retry", wl().quota_reserved().check("prov", "Retry", "Retrying after failure").obj(), WorkloadState.RETRY),
    ("retry-outranks-its-eviction", wl().check("prov", "Retry").evicted("AdmissionCheck").obj(), WorkloadState.RETRY),
    ("rejected", wl().quota_reserved().check("prov", "Rejected", "capacity revoked").obj(), WorkloadState.REJECTED),
    ("rejected-outranks-retry", wl().check("a", "Retry").check("b", "Rejected").obj(), WorkloadState.REJECTED),
    ("evicted-pods-ready-timeout", wl().admitted().evicted("PodsReadyTimeout").obj(), WorkloadState.EVICTED),
    ("evicted-reason-preempted", wl().admitted().evicted("Preempted").obj(), WorkloadState.PREEMPTED),
    ("preempted-condition", wl().admitted().preempted().obj(), WorkloadState.PREEMPTED),
    ("preempted-outranks-retry", wl().check("prov", "Retry").preempted().obj(), WorkloadState.PREEMPTED),
    ("inactive", wl().inactive().obj(), WorkloadState.INACTIVE),
    ("inactive-outranks-rejected", wl().check("prov", "Rejected").inactive().obj(), WorkloadState.INACTIVE),
    ("finished", wl().admitted().finished().obj(), WorkloadState.FINISHED),
    ("finished-outranks-inactive", wl().inactive().finished("Failed").obj(), WorkloadState.FINISHED),
]


@pytest.mark.parametrize(("workload_object", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify_workload(workload_object, expected):
    assert workload.classify_workload(workload_object) is expected


DESCRIBE_CASES = [
    ("missing", None, ""),
    (
        "pending-legacy",
        wl().waiting_for_quota().obj(),
        "Pending - couldn't assign flavors to pod set main",
    ),
    (
        "exceeds-max-quota",
        wl().waiting_for_quota("ExceedsMaxQuota", "request > maximum capacity").obj(),
        "ExceedsMaxQuota - request > maximum capacity",
    ),
    (
        "waiting-without-message",
        wl().waiting_for_quota("WaitingForQuota", "").obj(),
        "WaitingForQuota",
    ),
    ("pending-without-condition", wl().obj(), ""),
    (
        "pending-checks",
        wl().quota_reserved().check("prov", "Pending", "ETA 5m").check("other", "Pending").obj(),
        "admission check 'prov' pending: ETA 5m; admission check 'other' pending: no message",
    ),
    ("quota-reserved-no-checks", wl().quota_reserved().obj(), "QuotaReserved: Quota reserved in ClusterQueue cq"),
    ("rejected", wl().check("prov", "Rejected", "nodes gone").obj(), "admission check 'prov' is Rejected: nodes gone"),
    ("retry-without-message", wl().check("prov", "Retry").obj(), "admission check 'prov' is Retry"),
    ("preempted", wl().preempted().obj(), "InClusterQueue: Preempted to accommodate a workload"),
    ("preempted-by-eviction-reason", wl().evicted("Preempted").obj(), "Preempted: Evicted: Preempted"),
    ("inactive", wl().inactive().obj(), "Deactivated: Evicted: Deactivated"),
    ("admitted", wl().admitted().obj(), "Admitted: The workload is admitted"),
]


@pytest.mark.parametrize(
    ("workload_object", "expected"), [c[1:] for c in DESCRIBE_CASES], ids=[c[0] for c in DESCRIBE_CASES]
)
def test_describe(workload_object, expected):
    assert workload.describe(workload_object) == expected


ADMITTED_COUNT_CASES = [
    ("no-status", None, None),
    ("no-admission", wl().obj(), None),
    ("full", wl(4).quota_reserved().obj(), 4),
    ("partial", wl(8).quota_reserved(count=5).obj(), 5),
    ("no-assignments", {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": []}}}, None),
    ("assignment-without-count", {"status": {"admission": {"podSetAssignments": [{"name": "main"}]}}}, None),
    ("two-pod-sets", {"status": {"admission": {"podSetAssignments": [{"count": 2}, {"count": 3}]}}}, 5),
    ("garbage-assignment", {"status": {"admission": {"podSetAssignments": ["x"]}}}, None),
]


@pytest.mark.parametrize(
    ("workload_object", "expected"), [c[1:] for c in ADMITTED_COUNT_CASES], ids=[c[0] for c in ADMITTED_COUNT_CASES]
)
def test_admitted_count(workload_object, expected):
    assert conditions.admitted_count(workload_object) == expected


def test_pending_reason_is_empty_once_quota_is_reserved():
    assert workload.pending_reason(wl().quota_reserved().obj()) == ""
    assert workload.pending_reason(None) == ""


def test_a_pending_workload_s_decision_names_its_quota_reason_and_message():
    pending = wl(3).waiting_for_quota("ExceedsMaxQuota", "request > maximum capacity (6 > 4)").obj()
    assert reserving.from_workload(pending, 3).message == (
        "Workload job-gang-t1-abc-1a2b3 waiting for quota: ExceedsMaxQuota - request > maximum capacity (6 > 4)"
    )
    assert reserving.from_workload(wl(3).obj(), 3).message == "Workload job-gang-t1-abc-1a2b3 waiting for quota"

"""Failure mapping (retryable or not, with the whole story) and the summary's pieces."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_gang.operators.failures import GangFailedForGood, GangTryFailed, failure
from airflow_provider_gang.operators.history import TryRecord, totals
from airflow_provider_gang.operators.results import ranks_to_log
from airflow_provider_gang.reservation.phases import Reason


def record(attempt: int, outcome: str, reserved: float = 0.0, used: float = 0.0) -> TryRecord:
    return TryRecord(
        attempt=attempt,
        gang=f"g-t{attempt}",
        step="as configured" if attempt == 1 else "other zone b",
        step_index=None if attempt == 1 else 0,
        mode="provisioning_request",
        size=8,
        outcome=outcome,
        message="why",
        retryable=True,
        gpu_seconds_reserved=reserved,
        gpu_seconds_used=used,
        gpu_seconds_idle=reserved - used,
    )


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        pytest.param(Reason.CAPACITY_NOT_FOUND, GangTryFailed, id="capacity-refused-retries"),
        pytest.param(Reason.DEADLINE, GangTryFailed, id="per-try-deadline-retries"),
        pytest.param(Reason.BOOKING_EXPIRED, GangTryFailed, id="booking-expired-retries"),
        pytest.param(Reason.CAPACITY_REVOKED, GangTryFailed, id="revoked-retries"),
        pytest.param(Reason.KUEUE_REJECTED, GangTryFailed, id="kueue-rejection-retries"),
        pytest.param(Reason.MEMBER_FAILED, GangTryFailed, id="member-failed-retries"),
        pytest.param(Reason.INVALID, GangFailedForGood, id="invalid-fails-for-good"),
        pytest.param(Reason.START_WINDOW_MISSED, GangFailedForGood, id="start-window-fails-for-good"),
        pytest.param(Reason.LADDER_EXHAUSTED, GangFailedForGood, id="ladder-exhausted-fails-for-good"),
    ],
)
def test_reason_decides_whether_airflow_retries(reason: Reason, kind: type[Exception]) -> None:
    error = failure(reason, "details", [])
    assert type(error) is kind
    assert isinstance(error, AirflowFailException) == (kind is GangFailedForGood)


def test_final_failure_lists_every_try() -> None:
    message = str(failure(Reason.LADDER_EXHAUSTED, "no step left", [record(1, "deadline"), record(2, "deadline")]))
    assert "try 1 [as configured" in message and "try 2 [other zone b" in message


def test_gpu_hours_are_summed_over_tries() -> None:
    assert totals([record(1, "deadline", 3600, 0), record(2, "all_succeeded", 7200, 5400)]) == {
        "gpu_hours_reserved": 3.0,
        "gpu_hours_used": 1.5,
        "gpu_hours_idle": 1.5,
    }


@pytest.mark.parametrize(
    ("log_ranks", "size", "expected"),
    [([0], 8, [0]), ("all", 3, [0, 1, 2]), ([0, 6], 4, [0]), ((3, 1, 1), 4, [1, 3])],
    ids=["rank-0", "all", "rank-gone-after-shrink", "sorted-unique"],
)
def test_ranks_to_log(log_ranks: list[int] | str, size: int, expected: list[int]) -> None:
    assert ranks_to_log(log_ranks, size) == expected


def _ended_run(exit_code: int) -> tuple[dict, dict]:
    from tests.builders import gang_spec

    spec = gang_spec(size=2, retry_on_exit_codes=[137], fail_on_exit_codes=[2])
    members = [
        {"rank": 0, "state": "running", "exit_code": None},
        {"rank": 1, "state": "failed", "exit_code": exit_code, "reason": "Error"},
    ]
    event = {
        "status": "failure",
        "reason": "member_failed",
        "message": "1 of 2 failed",
        "members": members,
        "timings": {"event_at": 100.0, "phases": {}},
    }
    return spec.to_dict(), event


@pytest.mark.parametrize(
    ("exit_code", "outcome", "retryable", "decision"),
    [
        pytest.param(
            2,
            "member_exit_fails_for_good",
            False,
            {"rank": 1, "exit_code": 2, "rule": "fail_on_exit_codes", "reason": "member_exit_fails_for_good"},
            id="fail-on",
        ),
        pytest.param(
            137,
            "member_exit_retryable",
            True,
            {"rank": 1, "exit_code": 137, "rule": "retry_on_exit_codes", "reason": "member_exit_retryable"},
            id="retry-on",
        ),
        pytest.param(1, "member_failed", True, None, id="unlisted"),
    ],
)
def test_the_try_record_applies_the_exit_code_policy(
    exit_code: int, outcome: str, retryable: bool, decision: dict | None
) -> None:
    from airflow_provider_gang.operators.plan import TryPlan
    from airflow_provider_gang.operators.results import try_record, try_summary
    from airflow_provider_gang.operators.try_state import TryState
    from airflow_provider_gang.reservation.spec import GangSpec

    stored_spec, event = _ended_run(exit_code)
    plan = TryPlan(
        attempt=1,
        gang="gang-t1-abc",
        step="as configured",
        step_index=None,
        spec=stored_spec,
        requested_at=0.0,
        reservation_deadline=600.0,
        deadline_reason="deadline",
        start_deadline=None,
    )
    record = try_record(
        TryState(plan=plan, launched_at=10.0, size_run=2),
        GangSpec.from_dict(stored_spec),
        {"status": "success"},
        event,
        event,
        gpus=0,
        now=100.0,
    )
    assert (record.outcome, record.retryable, record.exit_code_decision) == (outcome, retryable, decision)
    assert record.exit_codes == {"1": exit_code}
    assert try_summary(record)["exit_code_decision"] == decision
    assert type(failure(Reason(record.outcome), record.message, [record])) is (
        GangTryFailed if retryable else GangFailedForGood
    )

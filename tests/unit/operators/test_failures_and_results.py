"""Failure mapping (retryable or not, with the whole story) and the summary's pieces."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_gang.operators.failures import GangFailedForGood, GangTryFailed, failure
from airflow_provider_gang.operators.history import TryRecord, totals
from airflow_provider_gang.operators.results import ranks_to_log
from airflow_provider_gang.reservation.phases import Reason


def record(attempt: int, outcome: str, reserved: float = 0.0, used: float = 0.0) -> TryRecord:
    return TryRecord(attempt=attempt, gang=f"g-t{attempt}", step="as configured" if attempt == 1 else "other zone b",
                     step_index=None if attempt == 1 else 0, mode="provisioning_request", size=8, outcome=outcome,
                     message="why", retryable=True, gpu_seconds_reserved=reserved, gpu_seconds_used=used,
                     gpu_seconds_idle=reserved - used)


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
        "gpu_hours_reserved": 3.0, "gpu_hours_used": 1.5, "gpu_hours_idle": 1.5,
    }


@pytest.mark.parametrize(
    ("log_ranks", "size", "expected"),
    [([0], 8, [0]), ("all", 3, [0, 1, 2]), ([0, 6], 4, [0]), ((3, 1, 1), 4, [1, 3])],
    ids=["rank-0", "all", "rank-gone-after-shrink", "sorted-unique"],
)
def test_ranks_to_log(log_ranks: list[int] | str, size: int, expected: list[int]) -> None:
    assert ranks_to_log(log_ranks, size) == expected

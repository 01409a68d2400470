"""Failure mapping: retryable or not, with the whole story of the tries."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_gang.operators.failures import GangFailedForGood, GangTryFailed, failure
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import TryRecord


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

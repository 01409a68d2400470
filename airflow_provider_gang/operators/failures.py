"""Turning typed gang failures into Airflow exceptions: the only place that does it (DEVELOPERS.md).

A try ends without success for a ``reservation.phases.Reason``. ``is_retryable`` sorts the reasons:

- retryable (capacity refused, per-try deadline, booking expired, capacity revoked, Kueue rejection or
  retry, preemption, a member failing or lost): ``GangTryFailed``, an ``AirflowException``, so Airflow
  retries and the next try picks its fallback step from the recorded reason;
- permanent (``invalid``: bad spec, 403, missing API kind; ``start_window_missed``;
  ``ladder_exhausted``; ``member_exit_fails_for_good``, a code of ``fail_on_exit_codes``):
  ``GangFailedForGood``, an ``AirflowFailException``, so no retry is wasted.

Both messages end with every try so far, its step and its outcome, so the final failure tells the
whole story.
"""

from __future__ import annotations

from airflow_provider_gang.airflow_compat import AirflowException, AirflowFailException
from airflow_provider_gang.reservation.phases import Reason, is_retryable
from airflow_provider_gang.reservation.records.tries import TryRecord
from airflow_provider_gang.reservation.tries.results import describe_tries


class GangTryFailed(AirflowException):  # type: ignore[misc]
    """This try failed for a reason a later try (possibly further down the ladder) can fix."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class GangFailedForGood(AirflowFailException):  # type: ignore[misc]
    """The task cannot succeed by retrying: fix the DAG or the cluster, or the start window passed."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def failure(reason: Reason, message: str, tries: list[TryRecord]) -> AirflowException:
    """The exception to raise for a try that ended with ``reason`` (see module docstring)."""
    story = describe_tries(tries)
    text = f"{reason.value}: {message}" + (f". Tries so far: {story}" if story else "")
    if is_retryable(reason):
        return GangTryFailed(reason, text)
    return GangFailedForGood(reason, text)

"""What a try will do: adopt the gang of a try that never finished, or pick a fallback step and build
the spec. Decided once per try, stored as ``gang.current`` before any object exists, and read back
by every later entry point of the same try (``dag.test()`` drops ``defer()`` kwargs, so nothing else
may carry it).

Rules, in order:

1. ``start_by`` (``data_interval_end + start_by``; ``run_after`` for runs without a data interval)
   already passed: no try (``start_window_missed``, no retry).
2. A try in progress is recorded but not finished: its worker died (or this is a resume of the same
   try). Its gang is *adopted* - same name, same spec, same step - so objects it created are reused,
   never duplicated.
3. Otherwise ``reservation.fallback.choose_step`` picks the step from the finished tries. Tries are
   numbered within the current sequence: a sequence ends with a try that cannot be retried (a
   success, or a permanent failure), so clearing a finished task starts the ladder again.
   An exhausted ladder means no try (``ladder_exhausted``, no retry).

Without ``fallbacks``, the ladder is ``retries`` times "retry as-is", so plain Airflow retries still
work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from airflow_provider_gang.operators import history as try_history
from airflow_provider_gang.reservation import fallback, naming
from airflow_provider_gang.reservation.phases import Reason, is_retryable
from airflow_provider_gang.reservation.spec import GangSpec, GangSpecError


class NoTry(Exception):
    """This try must not start; ``reason`` is a non-retryable ``Reason``."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class TryPlan:
    """One try, as stored under ``gang.current`` (plain values; ``spec`` is ``GangSpec.to_dict()``)."""

    attempt: int
    gang: str
    step: str
    step_index: int | None
    spec: dict[str, Any]
    requested_at: float
    reservation_deadline: float
    deadline_reason: str
    start_deadline: float | None
    adopted_from: int | None = None

    def gang_spec(self) -> GangSpec:
        return GangSpec.from_dict(self.spec)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TryPlan:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


def effective_ladder(fallbacks: Sequence[fallback.FallbackStep], retries: int) -> tuple[fallback.FallbackStep, ...]:
    """The ladder tries walk: ``fallbacks``, or ``retries`` plain retries when none are given."""
    return tuple(fallbacks) if fallbacks else tuple(fallback.RetryAsIs() for _ in range(max(0, retries)))


def current_sequence(records: list[try_history.TryRecord]) -> list[try_history.TryRecord]:
    """The finished tries since the last one that cannot be retried (see rule 3)."""
    start = 0
    for index, record in enumerate(records):
        if not is_retryable(Reason(record.outcome)):
            start = index + 1
    return records[start:]


def numbered_outcomes(sequence: list[try_history.TryRecord]) -> list[fallback.TryOutcome]:
    """Outcomes of ``sequence`` renumbered 1..n, as ``choose_step`` counts tries."""
    return [replace(outcome, try_number=position) for position, outcome in
            enumerate(try_history.outcomes(sequence), start=1)]


def start_window_end(context: Mapping[str, Any], start_by: Any) -> float | None:
    """Epoch seconds of ``data_interval_end + start_by`` (``run_after`` when there is no interval)."""
    if start_by is None:
        return None
    anchor = context.get("data_interval_end")
    if anchor is None:
        dag_run = context.get("dag_run")
        anchor = getattr(dag_run, "run_after", None) if dag_run is not None else None
    if not isinstance(anchor, datetime):
        return None
    return float((anchor + start_by).timestamp())


def plan_try(
    *,
    ti: Any,
    context: Mapping[str, Any],
    records: list[try_history.TryRecord],
    current: Mapping[str, Any] | None,
    ladder: Sequence[fallback.FallbackStep],
    build_spec: Any,
    reservation_timeout_seconds: float,
    start_by: Any,
    now: float,
) -> tuple[TryPlan, str]:
    """The plan of try ``ti.try_number`` and a sentence for the log saying what was chosen and why."""
    start_deadline = start_window_end(context, start_by)
    if current is not None:
        adopted = TryPlan.from_dict(current)
        if adopted.attempt == ti.try_number:
            return adopted, f"try {ti.try_number}: resuming gang {adopted.gang}"
        plan = replace(adopted, attempt=ti.try_number, adopted_from=adopted.adopted_from or adopted.attempt)
        return plan, (f"try {ti.try_number}: adopting gang {adopted.gang} left by try {adopted.attempt} "
                      "(its worker stopped before the try finished)")
    if start_deadline is not None and now >= start_deadline:
        raise NoTry(Reason.START_WINDOW_MISSED,
                    f"the gang had to start by {datetime.fromtimestamp(start_deadline).astimezone().isoformat()} "
                    "(data interval end + start_by); not starting another try")
    sequence = current_sequence(records)
    outcomes = numbered_outcomes(sequence)
    choice = fallback.choose_step(ladder, len(sequence) + 1, outcomes)
    if choice.exhausted:
        raise NoTry(Reason.LADDER_EXHAUSTED, f"{choice.explanation}; tries: {fallback.summarize(ladder, outcomes)}")
    map_index = getattr(ti, "map_index", None)
    name = naming.gang_name(ti.dag_id, ti.task_id, ti.run_id, map_index=-1 if map_index is None else map_index,
                            attempt=ti.try_number)
    indexes = [record.step_index for record in sequence] + [choice.step_index]
    try:
        spec = fallback.spec_for_steps(build_spec(name), ladder, indexes)
    except GangSpecError as error:
        raise NoTry(Reason.INVALID, f"{choice.explanation}, but the step cannot apply: {error}") from error
    deadline, deadline_reason = now + reservation_timeout_seconds, Reason.DEADLINE
    if start_deadline is not None and start_deadline < deadline:
        deadline, deadline_reason = start_deadline, Reason.START_WINDOW_MISSED
    plan = TryPlan(
        attempt=ti.try_number, gang=name, step=choice.step.describe() if choice.step else "as configured",
        step_index=choice.step_index, spec=spec.to_dict(), requested_at=now, reservation_deadline=deadline,
        deadline_reason=deadline_reason.value, start_deadline=start_deadline,
    )
    return plan, choice.explanation

"""What a try will do: adopt the gang of a try whose worker stopped, or pick a fallback step and
build the spec. Decided once per try as a ``reservation.records.tries.TryPlan``, stored before any
object exists and read back by every later entry point of the same try.

Rules, in order:

1. ``start_by`` (``data_interval_end + start_by``; ``run_after`` for runs without a data interval)
   already passed: no try (``start_window_missed``, no retry) - whatever an earlier try left, so an
   adopted gang cannot outlive the window either.
2. An earlier try is still recorded as in progress, and the cluster confirmed its gang is intact and
   still owned by it (``hooks.inspection.adoption_refusal``): its worker died. The gang is
   *adopted* - same name, spec and step - so objects it created are reused, never duplicated; the
   adopting try gets its own reservation deadline. A try that ended in any other way was recorded
   by ``operators.lifecycle`` and is never adopted. Pure: the cluster's answer and ``now`` are inputs.
3. Otherwise ``reservation.ladder_choice.choose_step`` picks the step from the finished tries (a
   transient failure that no unused step answers repeats the step, recorded ``repeats``). Tries are
   numbered within the current sequence: a sequence ends with a try that cannot be retried (a
   success, or a permanent failure), so clearing a finished task starts the ladder again. Killed
   tries are no input to the ladder (``phases.is_ladder_input``). An exhausted ladder means no try
   (``ladder_exhausted``, no retry).

The ladder a sequence walks is stored with every try (``TryPlan.ladder``, ``TryRecord.ladder``): a
DAG edited between retries cannot change what a stored step index means; the edit applies from the
next sequence on. Without ``fallbacks``, the ladder is ``retries`` times "retry as-is", so plain
Airflow retries still work. The plan names the cluster (``TryPlan.kubernetes_conn_id``): the last
``OtherCluster`` step used, else the operator's connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from airflow_provider_gang.reservation import fallback, ladder_choice, naming, unread_reports
from airflow_provider_gang.reservation.phases import Reason, is_ladder_input, is_retryable
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord
from airflow_provider_gang.reservation.spec import GangSpec, GangSpecError


class NoTry(Exception):
    """This try must not start; ``reason`` is a non-retryable ``Reason``."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def effective_ladder(fallbacks: Sequence[fallback.FallbackStep], retries: int) -> tuple[fallback.FallbackStep, ...]:
    """The ladder tries walk: ``fallbacks``, or ``retries`` plain retries when none are given."""
    return tuple(fallbacks) if fallbacks else tuple(fallback.RetryAsIs() for _ in range(max(0, retries)))


def sequence_tries(records: list[TryRecord]) -> list[TryRecord]:
    """The finished tries since the last one that cannot be retried (see rule 3), killed ones included."""
    start = 0
    for index, record in enumerate(records):
        reason = Reason(record.outcome)
        if is_ladder_input(reason) and not is_retryable(reason):
            start = index + 1
    return records[start:]


def current_sequence(records: list[TryRecord]) -> list[TryRecord]:
    """The finished tries since the last one that cannot be retried (see rule 3), killed ones left out."""
    return [record for record in sequence_tries(records) if is_ladder_input(Reason(record.outcome))]


def with_resume(spec: GangSpec, records: list[TryRecord], try_number: int) -> tuple[GangSpec, str]:
    """``spec`` with its checkpoint set for try ``try_number``: resuming from the latest checkpoint a
    try of the current sequence reported (killed tries included: their checkpoint is as good), else
    afresh; second item: a sentence for the log (``""`` without a checkpoint). A sequence that ended
    (success, or a failure for good) is not resumed from: clearing a finished task trains again."""
    if spec.checkpoint is None:
        return spec, ""
    sequence = sequence_tries(records)
    reports = [(record.attempt, record.checkpoint_step) for record in sequence if record.checkpoint_step is not None]
    attempt, step = reports[-1] if reports else (0, None)
    unread = unread_reports.since_report(
        [(record.attempt, record.unread_reports) for record in sequence if record.attempt >= attempt]
    )
    if step is None:
        why = f" ({unread})" if unread else ""
        note = f"; no earlier try of this run reported a checkpoint{why}, so members start afresh (GANG_RESUME unset)"
        return replace(spec, checkpoint=spec.checkpoint.for_try(try_number, None)), note
    note = f"; members resume from the checkpoint at step {step} that try {attempt} reported (GANG_RESUME=1)"
    if unread:
        note += f"; a newer one may exist: {unread}"
    return replace(spec, checkpoint=spec.checkpoint.for_try(try_number, step)), note


def sequence_ladder(
    sequence: list[TryRecord], configured: Sequence[fallback.FallbackStep]
) -> tuple[tuple[fallback.FallbackStep, ...], str]:
    """The ladder this sequence walks: the one its tries were planned with, else ``configured``;
    second item: a note for the log when the DAG's ladder changed meanwhile (else ``""``)."""
    ladder = next((record.ladder for record in reversed(sequence) if record.ladder is not None), None)
    if ladder is None:
        return tuple(configured), ""
    if ladder == tuple(configured):
        return ladder, ""
    return ladder, (
        "; the DAG's fallbacks changed since this sequence started, so it keeps the ladder it started "
        "with (the new one applies once the task succeeds or fails for good)"
    )


def numbered_outcomes(sequence: list[TryRecord]) -> list[ladder_choice.TryOutcome]:
    """Outcomes of ``sequence`` renumbered 1..n, as ``choose_step`` counts tries."""
    return [replace(outcome, try_number=position) for position, outcome in enumerate(outcomes(sequence), start=1)]


def outcomes(records: list[TryRecord]) -> list[ladder_choice.TryOutcome]:
    """The history ``reservation.ladder_choice.choose_step`` reads: the tries that are ladder input."""
    return [
        ladder_choice.TryOutcome(
            item.attempt,
            item.step_index,
            Reason(item.outcome),
            item.message,
            repeated=item.repeated,
            node_reclaimed=item.node_reclaimed,
        )
        for item in records
        if is_ladder_input(Reason(item.outcome))
    ]


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


def start_window_passed(start_deadline: float | None, now: float) -> NoTry | None:
    """Rule 1: the refusal to raise when ``start_by`` has passed, else ``None``."""
    if start_deadline is None or now < start_deadline:
        return None
    moment = datetime.fromtimestamp(start_deadline).astimezone().isoformat()
    return NoTry(
        Reason.START_WINDOW_MISSED,
        f"the gang had to start by {moment} (data interval end + start_by); not starting another try",
    )


def _reservation_deadline(now: float, timeout_seconds: float, start_deadline: float | None) -> tuple[float, Reason]:
    deadline, reason = now + timeout_seconds, Reason.DEADLINE
    if start_deadline is not None and start_deadline < deadline:
        deadline, reason = start_deadline, Reason.START_WINDOW_MISSED
    return deadline, reason


def adopt(
    stale: TryPlan, *, try_number: int, start_deadline: float | None, reservation_timeout_seconds: float, now: float
) -> tuple[TryPlan, str]:
    """Rule 2: try ``try_number`` takes over the intact gang of ``stale`` with a deadline of its own."""
    refusal = start_window_passed(start_deadline, now)
    if refusal is not None:
        raise refusal
    deadline, deadline_reason = _reservation_deadline(now, reservation_timeout_seconds, start_deadline)
    plan = replace(
        stale,
        attempt=try_number,
        adopted_from=stale.adopted_from or stale.attempt,
        reservation_deadline=deadline,
        deadline_reason=deadline_reason,
        start_deadline=start_deadline,
    )
    return plan, (
        f"try {try_number}: adopting gang {stale.gang} left by try {stale.attempt} "
        "(its worker stopped before the try finished; the gang is intact)"
    )


def describe_step(step: fallback.FallbackStep | None, spec: GangSpec) -> str:
    """The step as the try ran it: a ``ShrinkTo`` clamped by ``divisible_by`` or by an earlier, smaller
    shrink says the size it gave (``"shrink to 8 members, ran 6"``)."""
    if step is None:
        return "as configured"
    if isinstance(step, fallback.ShrinkTo) and spec.size != step.size:
        return f"{step.describe()}, ran {spec.size}"
    return step.describe()


def plan_try(
    *,
    ti: Any,
    records: list[TryRecord],
    ladder: Sequence[fallback.FallbackStep],
    configured: GangSpec,
    reservation_timeout_seconds: float,
    start_deadline: float | None,
    now: float,
    kubernetes_conn_id: str | None = None,
) -> tuple[TryPlan, str]:
    """Rules 1 and 3: the plan of a new try ``ti.try_number`` and a sentence for the log saying what
    was chosen and why. ``configured`` is the gang as the operator's arguments describe it, before
    any step, and ``kubernetes_conn_id`` the operator's connection; the plan gives the gang the
    try's name and the cluster of the last ``OtherCluster`` step used, if any."""
    refusal = start_window_passed(start_deadline, now)
    if refusal is not None:
        raise refusal
    sequence = current_sequence(records)
    walked, note = sequence_ladder(sequence, ladder)
    numbered = numbered_outcomes(sequence)
    choice = ladder_choice.choose_step(walked, len(sequence) + 1, numbered)
    if choice.exhausted:
        summary = ladder_choice.summarize(walked, numbered)
        raise NoTry(Reason.LADDER_EXHAUSTED, f"{choice.explanation}; tries: {summary}")
    map_index = getattr(ti, "map_index", None)
    name = naming.gang_name(
        ti.dag_id, ti.task_id, ti.run_id, map_index=-1 if map_index is None else map_index, attempt=ti.try_number
    )
    indexes = [record.step_index for record in sequence if not record.repeated]
    if not choice.repeats:
        indexes.append(choice.step_index)
    try:
        spec = fallback.spec_for_steps(replace(configured, name=name), walked, indexes)
    except GangSpecError as error:
        raise NoTry(Reason.INVALID, f"{choice.explanation}, but the step cannot apply: {error}") from error
    spec, resuming = with_resume(spec, records, ti.try_number)
    deadline, deadline_reason = _reservation_deadline(now, reservation_timeout_seconds, start_deadline)
    cluster = fallback.cluster_of(walked, indexes)
    plan = TryPlan(
        attempt=ti.try_number,
        gang=name,
        step=describe_step(choice.step, spec) + (" (repeated after a transient failure)" if choice.repeats else ""),
        step_index=choice.step_index,
        spec=spec,
        requested_at=now,
        reservation_deadline=deadline,
        deadline_reason=deadline_reason,
        start_deadline=start_deadline,
        ladder=walked,
        kubernetes_conn_id=kubernetes_conn_id if cluster is None else cluster.kubernetes_conn_id,
        repeats=choice.repeats,
    )
    return plan, choice.explanation + resuming + note

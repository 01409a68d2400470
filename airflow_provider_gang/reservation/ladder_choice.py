"""Which ladder step a try takes, chosen purely from the outcomes of the tries before it.

Try 1 runs the gang as configured. Every later try takes the **first step in ladder order that has
not been used up yet and that applies to the reason the previous try failed for**
(``reservation.fallback`` describes the steps and their default reasons). When no step is left for
that reason:

- a **transient** reason (:data:`TRANSIENT_REASONS`: the API server did not answer, answered
  nonsense, the try raised an error of no known kind, the reservation object vanished, a member was
  lost while its node stayed, another scheduler took the topology domain chosen before the bind)
  **repeats the step the failed try used**, without using up a step: a
  flaky API server says nothing about capacity, and Airflow's ``retries`` (and ``start_by``) still
  bound how often a task runs, as for every Airflow operator. ``worker_lost`` and ``killed`` tries
  are no input at all (``phases.is_ladder_input``), so the try after them takes the step they had.
- any other retryable reason - the capacity reasons: capacity refused, deadline, booking expired,
  revoked, quota, preemption - and a member's own failure (``member_failed``, answered by
  ``RetryAsIs`` and the exit-code policy) exhausts the ladder.

A repeated try is recorded ``repeated`` (``TryOutcome.repeated``): it does not count as a use of its
step, and the cumulative spec applies the step once.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.reservation import phases
from airflow_provider_gang.reservation.fallback import FallbackStep
from airflow_provider_gang.reservation.phases import Reason

TRANSIENT_REASONS = frozenset(
    {
        Reason.CLUSTER_UNREACHABLE,
        Reason.MALFORMED_ANSWER,
        Reason.UNEXPECTED_ERROR,
        Reason.RESERVATION_GONE,
        Reason.MEMBER_LOST,
        Reason.TOPOLOGY_DOMAIN_FULL,
    }
)
"""Retryable reasons that are not about capacity: a try that ended with one of them and that no
unused step answers repeats its step. ``topology_domain_full`` too: another scheduler's pods won the
race for the domain chosen, which says nothing about whether the gang fits; the next try chooses anew.
``member_lost`` only when no lost member's node was reclaimed
(:attr:`TryOutcome.node_reclaimed`); a removed node is capacity taken away."""


@dataclass(frozen=True)
class TryOutcome:
    """How one try ended (stored in the task's history): ``step_index`` is the ladder position the
    try used (``None``: the base spec), ``reason`` why it failed (or succeeded); ``repeated``: the try
    repeated the step of the try before it after a transient failure (not a use of the step);
    ``node_reclaimed``: a lost member's node was removed or shut down."""

    try_number: int
    step_index: int | None
    reason: Reason
    message: str = ""
    repeated: bool = False
    node_reclaimed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "try_number": self.try_number,
            "step_index": self.step_index,
            "reason": self.reason.value,
            "message": self.message,
            "repeated": self.repeated,
            "node_reclaimed": self.node_reclaimed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TryOutcome:
        return cls(
            int(data["try_number"]),
            data.get("step_index"),
            Reason(data["reason"]),
            str(data.get("message", "")),
            repeated=bool(data.get("repeated", False)),
            node_reclaimed=bool(data.get("node_reclaimed", False)),
        )


def is_transient(outcome: TryOutcome) -> bool:
    """Whether ``outcome`` is a transient failure (:data:`TRANSIENT_REASONS`)."""
    if outcome.reason is Reason.MEMBER_LOST:
        return not outcome.node_reclaimed
    return outcome.reason in TRANSIENT_REASONS


@dataclass(frozen=True)
class Choice:
    """What a try should do: ``step`` at ``step_index`` (both ``None`` for the base spec), or
    ``exhausted``; ``repeats``: the step is the previous try's, repeated after a transient failure
    (it does not use the step up); ``explanation`` says which and why, for the task log."""

    step: FallbackStep | None
    step_index: int | None
    exhausted: bool
    explanation: str
    repeats: bool = False


def describe_position(ladder: Sequence[FallbackStep], index: int | None) -> str:
    """``"step 2 (shrink to 2 members)"``, or ``"step 'as configured'"`` for the base spec."""
    if index is None or index >= len(ladder):
        return "step 'as configured'"
    return f"step {index + 1} ({ladder[index].describe()})"


def choose_step(ladder: Sequence[FallbackStep], try_number: int, history: Sequence[TryOutcome]) -> Choice:
    """The step try ``try_number`` uses, from the outcomes of the earlier tries (module docstring).

    If ``history`` lacks the previous try (state lost with a crashed worker), the step is taken by
    position in the ladder with every step repeated :attr:`~FallbackStep.uses` times, and the
    explanation says so.
    """
    if try_number <= 1:
        return Choice(None, None, False, "try 1: the gang as configured")
    previous = [outcome for outcome in history if outcome.try_number < try_number]
    if not previous or previous[-1].try_number != try_number - 1:
        return _by_position(ladder, try_number)
    last = previous[-1]
    if not phases.is_retryable(last.reason):
        return Choice(
            None,
            None,
            True,
            f"try {try_number}: try {last.try_number} ended with {last.reason.value}, which no fallback step can fix",
        )
    unused = _unused_step(ladder, try_number, previous)
    return unused if unused is not None else _without_a_step(ladder, try_number, last)


def _by_position(ladder: Sequence[FallbackStep], try_number: int) -> Choice:
    """The step at the try's position in the ladder (each step :attr:`~FallbackStep.uses` times), or
    the ladder used up: the previous try's outcome is unknown."""
    positions = [index for index, step in enumerate(ladder) for _ in range(step.uses)]
    if try_number - 2 < len(positions):
        index = positions[try_number - 2]
        return Choice(
            ladder[index],
            index,
            False,
            f"try {try_number}: step {index + 1} "
            f"({ladder[index].describe()}) by position; the previous try's outcome is unknown",
        )
    return Choice(None, None, True, f"try {try_number}: all {len(ladder)} fallback step(s) used")


def _unused_step(ladder: Sequence[FallbackStep], try_number: int, previous: Sequence[TryOutcome]) -> Choice | None:
    """The first step with uses left that answers the last try's reason, or ``None``."""
    last = previous[-1]
    used = collections.Counter(outcome.step_index for outcome in previous if not outcome.repeated)
    for index, step in enumerate(ladder):
        if used[index] < step.uses and last.reason in step.reasons:
            turn = f", use {used[index] + 1} of {step.uses}" if step.uses > 1 else ""
            return Choice(
                step,
                index,
                False,
                f"try {try_number}: step {index + 1} ({step.describe()}{turn}) because "
                f"try {last.try_number} ended with {last.reason.value}",
            )
    return None


def _without_a_step(ladder: Sequence[FallbackStep], try_number: int, last: TryOutcome) -> Choice:
    """No unused step answers the last try's reason: repeat its step after a transient failure
    (using none up), else the ladder is exhausted."""
    if is_transient(last):
        repeated = last.step_index if last.step_index is not None and last.step_index < len(ladder) else None
        return Choice(
            None if repeated is None else ladder[repeated],
            repeated,
            False,
            f"try {try_number}: repeating {describe_position(ladder, repeated)} after a transient failure "
            f"({last.reason.value}) of try {last.try_number}; no unused fallback step answers it, so none is used up",
            repeats=True,
        )
    return Choice(
        None,
        None,
        True,
        f"try {try_number}: no unused fallback step applies to {last.reason.value} (ladder of {len(ladder)} step(s))",
    )


def summarize(ladder: Sequence[FallbackStep], history: Sequence[TryOutcome]) -> str:
    """The final failure message: every try, the step it used and how it ended."""
    lines = []
    for outcome in history:
        index = outcome.step_index
        known = index is not None and index < len(ladder)
        step = f"step {index + 1}: {ladder[index].describe()}" if index is not None and known else "as configured"
        again = ", repeated" if outcome.repeated else ""
        detail = f" - {outcome.message}" if outcome.message else ""
        lines.append(f"try {outcome.try_number} ({step}{again}): {outcome.reason.value}{detail}")
    return "; ".join(lines) if lines else "no try finished"

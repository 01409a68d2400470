"""The fallback ladder: typed steps a retry walks down, chosen purely from the try history.

A ladder is an ordered tuple of steps. Try 1 runs the gang as configured. Every later try takes
the **first step in ladder order that has not been used up yet and that applies to the reason the
previous try failed for**; steps whose reasons do not match are passed over (and stay available for
a later failure with a matching reason). A step is used up after :attr:`FallbackStep.uses` tries:
one for every step but ``RetryAsIs(times=n)``, so ``(RetryAsIs(times=3), OnDemand())`` answers spot
preemptions by staying on spot three times, then leaving it. Steps are **cumulative**: try *n* runs the base spec with
every step used so far applied in the order they were used, so moving on to another zone after a
shrink keeps the smaller size. When no step is left for the reason, the ladder is exhausted.

Default reasons per step (override with ``applies_to``):

=========================  =================================================================
``RetryAsIs``               any retryable reason (booking expired, revoked, member failed...)
``ShrinkTo``                capacity refused, deadline, provisioning failed, Kueue retry/reject
``OtherZone``               capacity refused, deadline, provisioning failed, revoked, booking expired
``OtherProvisioningClass``  capacity refused, deadline, provisioning failed, revoked
``OtherQueue``              deadline, Kueue retry/reject, preempted, evicted, deactivated
``OnDemand``                revoked, preempted, spot preempted, evicted, member lost, capacity
                            refused, deadline
``UseReservation``          capacity refused, deadline, provisioning failed, revoked, preempted
``LeaveReservation``        capacity refused, deadline, provisioning failed, revoked
=========================  =================================================================

Non-retryable reasons (invalid spec, start window missed) never choose a step.

This module owns the steps, their checks and the choice among them; turning a choice into the next
try's plan is :mod:`.tries.plan`'s.
"""

from __future__ import annotations

import collections
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_gang.reservation import phases
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

_CAPACITY = frozenset({Reason.CAPACITY_NOT_FOUND, Reason.DEADLINE, Reason.PROVISIONING_FAILED})
_QUOTA = frozenset({Reason.KUEUE_RETRY, Reason.KUEUE_REJECTED})
_RETRYABLE = frozenset(reason for reason in Reason if phases.is_retryable(reason))


@dataclass(frozen=True)
class FallbackStep(ABC):
    """Base of every step. ``applies_to`` lists the failure reasons the step answers; empty means the
    step's default (see module docstring)."""

    applies_to: frozenset[Reason] = field(default=frozenset(), kw_only=True)
    default_reasons: ClassVar[frozenset[Reason]] = _RETRYABLE
    required_mode: ClassVar[str] = ""
    """The reservation mode the step needs, or ``""`` when any mode (or several) will do."""

    @property
    def reasons(self) -> frozenset[Reason]:
        return frozenset(Reason(reason) for reason in self.applies_to) or self.default_reasons

    @property
    def uses(self) -> int:
        """How many tries may use this step before it is used up."""
        return 1

    @abstractmethod
    def describe(self) -> str:
        """A short human description for logs and the final failure message."""

    @abstractmethod
    def apply(self, spec: GangSpec) -> GangSpec:
        """The spec of a try that uses this step, derived from the previous try's ``spec``."""


@dataclass(frozen=True)
class RetryAsIs(FallbackStep):
    """Try again unchanged (with a new name: a new try always gets new objects), up to ``times``
    tries."""

    times: int = 1

    @property
    def uses(self) -> int:
        return self.times

    def describe(self) -> str:
        return "retry as-is" if self.times == 1 else f"retry as-is (up to {self.times} times)"

    def apply(self, spec: GangSpec) -> GangSpec:
        return spec


@dataclass(frozen=True)
class ShrinkTo(FallbackStep):
    """Run with fewer members: the largest multiple of ``divisible_by`` that is <= ``size`` (and no
    larger than the current size). Refused below the gang's ``min_size``. Members learn both sizes
    (``GANG_ORIGINAL_SIZE``, ``GANG_SIZE``) to compensate, e.g. by gradient accumulation."""

    size: int
    divisible_by: int = 1
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | _QUOTA

    def describe(self) -> str:
        multiple = f" (a multiple of {self.divisible_by})" if self.divisible_by > 1 else ""
        return f"shrink to {self.size} members{multiple}"

    def target(self, current: int) -> int:
        """The size this step shrinks a gang of ``current`` members to."""
        ceiling = min(self.size, current)
        return ceiling - ceiling % self.divisible_by

    def apply(self, spec: GangSpec) -> GangSpec:
        if not isinstance(self.size, int) or self.size < 1:
            raise GangSpecError("fallbacks", f"{self.describe()}: size must be a whole number >= 1")
        if not isinstance(self.divisible_by, int) or self.divisible_by < 1:
            raise GangSpecError("fallbacks", f"{self.describe()}: divisible_by must be a whole number >= 1")
        size = self.target(spec.size)
        if size < spec.floor:
            raise GangSpecError(
                "fallbacks", f"{self.describe()} gives {size} members, below min_size={spec.floor}; lower min_size"
            )
        minimum = None if spec.min_size is None else min(spec.min_size, size)
        return dataclasses.replace(spec, size=size, min_size=minimum, original_size=spec.size_before_shrink)


@dataclass(frozen=True)
class OtherZone(FallbackStep):
    """Place the gang in ``zone`` (strictly, by default: a required node selector)."""

    zone: str
    strict: bool = True
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {Reason.CAPACITY_REVOKED, Reason.BOOKING_EXPIRED}

    def describe(self) -> str:
        return f"other zone {self.zone}"

    def apply(self, spec: GangSpec) -> GangSpec:
        return dataclasses.replace(spec, zone=self.zone, strict_zone=self.strict)


@dataclass(frozen=True)
class OtherProvisioningClass(FallbackStep):
    """Ask with another ProvisioningRequest class (and its parameters, replacing the old ones)."""

    provisioning_class: str
    parameters: tuple[tuple[str, str], ...] = ()
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {Reason.CAPACITY_REVOKED}
    """``capacity_revoked`` too: a Dynamic Workload Scheduler run cut at ``maxRunDurationSeconds`` is
    exactly when a user moves to another class."""

    def describe(self) -> str:
        return f"other provisioning class {self.provisioning_class}"

    def apply(self, spec: GangSpec) -> GangSpec:
        if not spec.mode.uses_provisioning_request:
            needs = "needs a ProvisioningRequest mode"
            raise GangSpecError("fallbacks", f"{self.describe()} {needs}, not {spec.mode.value!r}")
        return dataclasses.replace(
            spec, provisioning_class=self.provisioning_class, provisioning_parameters=dict(self.parameters)
        )


@dataclass(frozen=True)
class OtherQueue(FallbackStep):
    """Submit to another Kueue LocalQueue (quota fallback)."""

    queue: str
    required_mode: ClassVar[str] = ReservationMode.KUEUE.value
    default_reasons: ClassVar[frozenset[Reason]] = _QUOTA | {
        Reason.DEADLINE,
        Reason.PREEMPTED,
        Reason.EVICTED,
        Reason.WORKLOAD_DEACTIVATED,
    }

    def describe(self) -> str:
        return f"other queue {self.queue}"

    def apply(self, spec: GangSpec) -> GangSpec:
        if spec.mode is not ReservationMode.KUEUE:
            raise GangSpecError("fallbacks", f"{self.describe()} needs reservation='kueue', not {spec.mode.value!r}")
        return dataclasses.replace(spec, queue=self.queue)


@dataclass(frozen=True)
class OnDemand(FallbackStep):
    """Leave spot capacity for on-demand."""

    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {
        Reason.CAPACITY_REVOKED,
        Reason.PREEMPTED,
        Reason.SPOT_PREEMPTED,
        Reason.EVICTED,
        Reason.MEMBER_LOST,
    }

    def describe(self) -> str:
        return "spot to on-demand"

    def apply(self, spec: GangSpec) -> GangSpec:
        return dataclasses.replace(spec, spot=False)


@dataclass(frozen=True)
class UseReservation(FallbackStep):
    """Consume the GKE specific reservation ``name`` (on-demand capacity bought ahead): members
    require nodes labelled ``cloud.google.com/reservation-name=<name>``. Reservations serve
    on-demand VMs only, so the step also leaves spot. As the first rung, write the operator's
    ``use_reservation=`` instead."""

    name: str
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {Reason.CAPACITY_REVOKED, Reason.PREEMPTED}
    """``preempted`` too: capacity bought ahead is the answer to spot or quota being taken away."""

    def describe(self) -> str:
        return f"use reservation {self.name}"

    def apply(self, spec: GangSpec) -> GangSpec:
        return dataclasses.replace(spec, reservation_name=self.name, spot=False)


@dataclass(frozen=True)
class LeaveReservation(FallbackStep):
    """Stop requiring a reservation: run on ordinary on-demand capacity, or on spot with
    ``spot=True`` (the reservation is full, or its nodes were taken back)."""

    spot: bool = False
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {Reason.CAPACITY_REVOKED}

    def describe(self) -> str:
        return "leave the reservation for spot" if self.spot else "leave the reservation for on-demand"

    def apply(self, spec: GangSpec) -> GangSpec:
        return dataclasses.replace(spec, reservation_name=None, spot=self.spot)


@dataclass(frozen=True)
class TryOutcome:
    """How one try ended (stored in the task's history): ``step_index`` is the ladder position the
    try used (``None``: the base spec), ``reason`` why it failed (or succeeded)."""

    try_number: int
    step_index: int | None
    reason: Reason
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "try_number": self.try_number,
            "step_index": self.step_index,
            "reason": self.reason.value,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TryOutcome:
        message = str(data.get("message", ""))
        return cls(int(data["try_number"]), data.get("step_index"), Reason(data["reason"]), message)


@dataclass(frozen=True)
class Choice:
    """What a try should do: ``step`` at ``step_index`` (both ``None`` for the base spec), or
    ``exhausted``; ``explanation`` says which and why, for the task log."""

    step: FallbackStep | None
    step_index: int | None
    exhausted: bool
    explanation: str


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
    last = previous[-1]
    if not phases.is_retryable(last.reason):
        return Choice(
            None,
            None,
            True,
            f"try {try_number}: try {last.try_number} ended with {last.reason.value}, which no fallback step can fix",
        )
    used = collections.Counter(outcome.step_index for outcome in previous)
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
    return Choice(
        None,
        None,
        True,
        f"try {try_number}: no unused fallback step applies to {last.reason.value} (ladder of {len(ladder)} step(s))",
    )


def spec_for_steps(base: GangSpec, ladder: Sequence[FallbackStep], step_indexes: Iterable[int | None]) -> GangSpec:
    """``base`` with the ladder steps at ``step_indexes`` applied in that order (``None`` skipped)."""
    spec = base
    for index in step_indexes:
        if index is not None:
            spec = ladder[index].apply(spec)
    return spec


def check_ladder(ladder: Sequence[FallbackStep], base: GangSpec) -> None:
    """Raise :class:`GangSpecError` (field ``fallbacks``) if a step cannot apply to ``base``, alone
    or after the steps before it; run at DAG parse time so a bad ladder never reaches a retry."""
    spec = base
    for index, step in enumerate(ladder):
        if not isinstance(step, FallbackStep):
            raise GangSpecError("fallbacks", f"step {index + 1} is {step!r}, not a reservation.fallback step")
        if isinstance(step.applies_to, str) or not isinstance(step.applies_to, (set, frozenset, list, tuple)):
            raise GangSpecError(
                "fallbacks",
                f"step {index + 1} ({step.describe()}): applies_to must be a set of "
                f"reasons, got {step.applies_to!r}; write e.g. applies_to={{{step.applies_to!r}}}",
            )
        unknown = [reason for reason in step.applies_to if reason not in set(Reason)]
        if unknown:
            raise GangSpecError("fallbacks", f"step {index + 1}: unknown reasons {unknown}")
        if not isinstance(step.uses, int) or isinstance(step.uses, bool) or step.uses < 1:
            raise GangSpecError(
                "fallbacks",
                f"step {index + 1} ({type(step).__name__}): times must be a whole "
                f"number >= 1, got {step.uses!r}; write e.g. RetryAsIs(times=3)",
            )
        try:
            step.apply(base)
            spec = step.apply(spec)
        except GangSpecError as error:
            raise GangSpecError("fallbacks", f"step {index + 1} ({step.describe()}): {error}") from None


def no_op_steps(ladder: Sequence[FallbackStep], base: GangSpec) -> list[str]:
    """Descriptions of the steps that change nothing when applied right after the steps before them
    (``ShrinkTo(16)`` on a gang of 4): worth a warning, not an error."""
    found, spec = [], base
    for index, step in enumerate(ladder):
        after = step.apply(spec)
        unchanged = after.size == spec.size if isinstance(step, ShrinkTo) else after == spec
        if unchanged and not isinstance(step, RetryAsIs):
            found.append(f"step {index + 1} ({step.describe()})")
        spec = after
    return found


def required_modes(ladder: Sequence[FallbackStep]) -> tuple[tuple[str, str], ...]:
    """``(description, required mode or "")`` per step, for checking the ladder against the mode."""
    return tuple((step.describe(), step.required_mode) for step in ladder)


def tries_needed(ladder: Sequence[FallbackStep]) -> int:
    """The retries that walk the whole ladder: every step's :attr:`~FallbackStep.uses`, summed."""
    return sum(step.uses for step in ladder)


def summarize(ladder: Sequence[FallbackStep], history: Sequence[TryOutcome]) -> str:
    """The final failure message: every try, the step it used and how it ended."""
    lines = []
    for outcome in history:
        index = outcome.step_index
        known = index is not None and index < len(ladder)
        step = f"step {index + 1}: {ladder[index].describe()}" if index is not None and known else "as configured"
        detail = f" - {outcome.message}" if outcome.message else ""
        lines.append(f"try {outcome.try_number} ({step}): {outcome.reason.value}{detail}")
    return "; ".join(lines) if lines else "no try finished"

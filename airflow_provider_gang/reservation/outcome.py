"""The result types of :func:`reservation.decision.decide`: :class:`Decision` and its :class:`Policy`."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_provider_gang.reservation.members import MemberStatus
from airflow_provider_gang.reservation.phases import Phase, Reason


@dataclass(frozen=True)
class Policy:
    """Limits of one wait, as absolute epoch seconds (``None``: no limit).

    - ``deadline``: the wait ends at this moment whatever the objects say.
    - ``deadline_reason``: the reason given when ``deadline`` ends it.
    - ``startup_deadline``: run stage only, members must all be running (or done) by then.
    """

    deadline: float | None = None
    deadline_reason: Reason = Reason.DEADLINE
    startup_deadline: float | None = None


@dataclass(frozen=True)
class Decision:
    """Where the gang stands.

    - ``phase`` / ``reason``: :class:`Phase` and :class:`Reason` (stored format).
    - ``terminal``: the wait is over (granted, succeeded, or failed); a trigger yields its event.
    - ``message``: for humans; quotes the upstream condition that decided.
    - ``admitted_count``: members granted (Kueue partial admission may grant fewer than asked).
    - ``members``: per-rank status (run stage), ordered by rank.
    """

    phase: Phase
    terminal: bool
    reason: Reason
    message: str
    admitted_count: int | None = None
    members: tuple[MemberStatus, ...] = field(default_factory=tuple)

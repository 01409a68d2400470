"""When each phase of a wait was first seen: the ``timings`` of the event a gang trigger yields.

The event itself is ``reservation.records.events.GangEvent`` (its module docstring lists every field).
"""

from __future__ import annotations

from airflow_provider_gang.reservation.phases import Phase
from airflow_provider_gang.reservation.records.events import EventTimings


class PhaseClock:
    """Records when each phase was first observed, for the event's ``timings``."""

    def __init__(self, started_at: float) -> None:
        self.started_at = started_at
        self.first_seen: dict[str, float] = {}

    def saw(self, phase: Phase, at: float) -> None:
        self.first_seen.setdefault(phase.value, at)

    def timings(self, event_at: float) -> EventTimings:
        return EventTimings(
            started_at=self.started_at,
            event_at=event_at,
            waited_seconds=max(0.0, event_at - self.started_at),
            phases=dict(self.first_seen),
        )

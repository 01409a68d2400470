"""The payload of the one ``TriggerEvent`` each gang trigger yields (a stored format).

Fields (plain JSON values)::

    status          "success" (phase reserved or succeeded) | "failure"
    stage           reservation.observed.Stage value: "reservation" | "run"
    gang_name, namespace, mode
    phase, terminal, reason, message, admitted_count, members
                    reservation.decision.Decision.as_event() - reason is a reservation.phases.Reason value
    api_error       null, or {"type": <kube.errors class name>, "code": <HTTP status or null>} when the
                    API refused the watch itself (Forbidden, Unauthorized, kind not served...); reason
                    is then "invalid": a new try of the same spec cannot help
    timings         {"started_at", "event_at", "waited_seconds", "phases": {<phase>: first seen at}}
    checkpoint      null, or the latest checkpoint a member's termination message reported during the
                    wait: reservation.checkpoint.CheckpointReport.to_dict() ({"step", "progress", "pod",
                    "rank"}); events of older versions lack the key (read as null)

All times are UNIX seconds, read from ``reservation.clock``. Fields may be added, never renamed or
removed: deferred tasks created by an older version read events produced by a newer one.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.kube import errors
from airflow_provider_gang.reservation import clock as reservation_clock
from airflow_provider_gang.reservation.checkpoint import CheckpointReport
from airflow_provider_gang.reservation.decision import Decision
from airflow_provider_gang.reservation.observed import Observed
from airflow_provider_gang.reservation.phases import Phase

SUCCESS_PHASES = frozenset({Phase.RESERVED, Phase.SUCCEEDED})


class PhaseClock:
    """Records when each phase was first observed, for the event's ``timings``."""

    def __init__(self, started_at: float) -> None:
        self.started_at = started_at
        self.first_seen: dict[str, float] = {}

    def saw(self, phase: Phase, at: float) -> None:
        self.first_seen.setdefault(phase.value, at)

    def timings(self, event_at: float) -> dict[str, Any]:
        return {
            "started_at": self.started_at,
            "event_at": event_at,
            "waited_seconds": max(0.0, event_at - self.started_at),
            "phases": dict(self.first_seen),
        }


def build_payload(
    observed: Observed,
    decision: Decision,
    *,
    gang_name: str,
    namespace: str,
    clock: PhaseClock,
    api_error: errors.KubeError | None = None,
    checkpoint: CheckpointReport | None = None,
) -> dict[str, Any]:
    """The event payload for ``decision`` (see the module docstring)."""
    event_at = reservation_clock.current().now()
    clock.saw(decision.phase, event_at)
    return {
        "status": "success" if decision.phase in SUCCESS_PHASES else "failure",
        "stage": observed.stage.value,
        "gang_name": gang_name,
        "namespace": namespace,
        "mode": observed.mode.value,
        **decision.as_event(),
        "api_error": None
        if api_error is None
        else {"type": type(api_error).__name__, "code": getattr(api_error, "code", None)},
        "timings": clock.timings(event_at),
        "checkpoint": None if checkpoint is None else checkpoint.to_dict(),
    }

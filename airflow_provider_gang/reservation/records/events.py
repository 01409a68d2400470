"""``GangEvent``: the payload of the one ``TriggerEvent`` each gang trigger yields.

Fields (``to_dict()`` writes them as plain JSON values)::

    version         1
    status          "success" (phase reserved or succeeded) | "failure"
    stage           reservation.observed.Stage value: "reservation" | "run"
    gang_name, namespace, mode
    phase, terminal, reason, message, admitted_count, members
                    reservation.decision.Decision: reason is a reservation.phases.Reason value,
                    members one reservation.members.MemberStatus each, ordered by rank
    api_error       null, or {"type": <kube.errors class name>, "code": <HTTP status or null>} when the
                    API refused the watch itself (Forbidden, Unauthorized, kind not served...); reason
                    is then "invalid": a new try of the same spec cannot help
    timings         {"started_at", "event_at", "waited_seconds", "phases": {<phase>: first seen at}}
    checkpoint      null, or the latest checkpoint a member's termination message reported during the
                    wait: reservation.checkpoint.CheckpointReport ({"step", "progress", "pod", "rank"})
    logs            {<rank>: <tail of its log>} of the log ranks, read by a run wait before it stopped
                    the survivors of a checkpointed gang, or when a run on a Kueue MultiKueue worker
                    ended (MultiKueue deletes the worker's copies then): their pods are gone by the
                    time the operator reads logs; {} otherwise. Each tail is at most
                    hooks.inspection.SAVED_LOG_BYTES (its end)
    unread_reports  [{"rank", "gap", "detail"}]: the survivors of a checkpointed gang whose checkpoint
                    report the run wait could not read while it stopped them, and why
                    (reservation.unread_reports.UnreadReport; gap a ReportGap value); [] otherwise

All times are UNIX seconds, read from ``reservation.clock``. The event crosses from the triggerer
to the worker through Airflow's database (``TaskInstance.next_kwargs``), so it is a stored format:
fields may be added, never renamed or removed, and the operator reads it through
:meth:`GangEvent.from_dict` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.reservation.checkpoint import CheckpointReport
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.outcome import Decision
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.records.reading import CURRENT_VERSION, record_values
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.reservation.unread_reports import UnreadReport

SUCCESS_PHASES = frozenset({Phase.RESERVED, Phase.SUCCEEDED})
"""The phases a ``"success"`` event ends in."""


@dataclass(frozen=True)
class EventTimings:
    """When the wait started and ended, and when each phase was first seen (UNIX seconds)."""

    started_at: float
    event_at: float
    waited_seconds: float
    phases: Mapping[str, float] = field(default_factory=dict)

    def first_seen(self, phase: Phase) -> float | None:
        """When ``phase`` was first observed during the wait; ``None``: never."""
        return self.phases.get(phase.value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "started_at": self.started_at,
            "event_at": self.event_at,
            "waited_seconds": self.waited_seconds,
            "phases": dict(self.phases),
        }

    @classmethod
    def from_dict(cls, data: Any) -> EventTimings:
        return cls(
            **record_values(
                cls,
                data,
                {
                    "started_at": float,
                    "event_at": float,
                    "waited_seconds": float,
                    "phases": lambda phases: {str(name): float(at) for name, at in dict(phases).items()},
                },
            )
        )


@dataclass(frozen=True)
class ApiRefusal:
    """The API server refused the watch itself: the ``kube.errors`` class name and HTTP status."""

    type: str
    code: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "code": self.code}

    @classmethod
    def from_dict(cls, data: Any) -> ApiRefusal:
        return cls(**record_values(cls, data, {"type": str, "code": int}))


def member_to_dict(member: MemberStatus) -> dict[str, Any]:
    """One member as the event carries it."""
    return {
        "rank": member.rank,
        "state": member.state.value,
        "pod_name": member.pod_name,
        "node": member.node,
        "exit_code": member.exit_code,
        "reason": member.reason,
        "message": member.message,
        "started_at": member.started_at,
        "finished_at": member.finished_at,
    }


def member_from_dict(data: Any) -> MemberStatus:
    """Inverse of :func:`member_to_dict`, tolerant like every record reader."""
    return MemberStatus(
        **record_values(
            MemberStatus,
            data,
            {"rank": int, "state": MemberState, "exit_code": int, "started_at": float, "finished_at": float},
        )
    )


@dataclass(frozen=True)
class GangEvent:
    """The outcome of one wait (see the module docstring)."""

    stage: Stage
    gang_name: str
    namespace: str
    mode: ReservationMode
    phase: Phase
    terminal: bool
    reason: Reason
    message: str
    admitted_count: int | None = None
    members: tuple[MemberStatus, ...] = ()
    api_error: ApiRefusal | None = None
    timings: EventTimings | None = None
    checkpoint: CheckpointReport | None = None
    logs: tuple[tuple[int, str], ...] = ()
    unread_reports: tuple[UnreadReport, ...] = ()

    @property
    def succeeded(self) -> bool:
        """Whether the wait ended well: the reservation granted, or every member succeeded."""
        return self.phase in SUCCESS_PHASES

    @classmethod
    def of_decision(
        cls,
        decision: Decision,
        *,
        stage: Stage,
        gang_name: str,
        namespace: str,
        mode: ReservationMode,
        timings: EventTimings,
        api_error: ApiRefusal | None = None,
        checkpoint: CheckpointReport | None = None,
        logs: tuple[tuple[int, str], ...] = (),
        unread_reports: tuple[UnreadReport, ...] = (),
    ) -> GangEvent:
        """The event that reports ``decision``."""
        return cls(
            stage=stage,
            gang_name=gang_name,
            namespace=namespace,
            mode=mode,
            phase=decision.phase,
            terminal=decision.terminal,
            reason=decision.reason,
            message=decision.message,
            admitted_count=decision.admitted_count,
            members=decision.members,
            api_error=api_error,
            timings=timings,
            checkpoint=checkpoint,
            logs=logs,
            unread_reports=unread_reports,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CURRENT_VERSION,
            "status": "success" if self.succeeded else "failure",
            "stage": self.stage.value,
            "gang_name": self.gang_name,
            "namespace": self.namespace,
            "mode": self.mode.value,
            "phase": self.phase.value,
            "terminal": self.terminal,
            "reason": self.reason.value,
            "message": self.message,
            "admitted_count": self.admitted_count,
            "members": [member_to_dict(member) for member in self.members],
            "api_error": None if self.api_error is None else self.api_error.to_dict(),
            "timings": None if self.timings is None else self.timings.to_dict(),
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_dict(),
            "logs": {str(rank): text for rank, text in self.logs},
            "unread_reports": [item.to_dict() for item in self.unread_reports],
        }

    @classmethod
    def from_dict(cls, data: Any) -> GangEvent:
        """Read a payload; ``status`` is derived from ``phase``, so it is not read back."""
        return cls(
            **record_values(
                cls,
                data,
                {
                    "stage": Stage,
                    "mode": ReservationMode,
                    "phase": Phase,
                    "terminal": bool,
                    "reason": Reason,
                    "admitted_count": int,
                    "members": lambda members: tuple(member_from_dict(member) for member in members),
                    "api_error": ApiRefusal.from_dict,
                    "timings": EventTimings.from_dict,
                    "checkpoint": CheckpointReport.from_dict,
                    "logs": lambda logs: tuple(sorted((int(rank), str(text)) for rank, text in logs.items())),
                    "unread_reports": lambda items: tuple(UnreadReport.from_dict(item) for item in items),
                },
            )
        )

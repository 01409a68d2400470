"""Checkpoint reports a try could not read, and why: so a try that starts afresh says so.

When a try ends while members still run, the run trigger stops them and reads the checkpoint report
each writes on SIGTERM (``triggers.survivors``, ``reservation.checkpoint``). A member whose report it
could not read is one :class:`UnreadReport`; it travels in the trigger's event
(``GangEvent.unread_reports``) into the try's record (``TryRecord.unread_reports``), and the next
try's plan line names it (:func:`since_report`), because the checkpoint it may have written is newer
than anything the next try resumes from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_provider_gang.reservation.records.reading import record_values


class ReportGap(str, Enum):
    """Why a running member's report was not read (stored format: values never change)."""

    DELETE_FAILED = "delete_failed"
    """It was not stopped: its delete failed past the client's retries."""
    WATCH_FAILED = "watch_failed"
    """The members could not be listed within the wait, or their watch failed for good."""
    NOT_SEEN_STOPPED = "not_seen_stopped"
    """No terminated state of it arrived within its grace period and the margin after it."""
    GONE_UNSEEN = "gone_unseen"
    """Its pod was removed before its terminated state was seen."""


_GAP_TEXT = {
    ReportGap.DELETE_FAILED: "not stopped: the delete failed past the client's retries",
    ReportGap.WATCH_FAILED: "the members could not be listed or watched",
    ReportGap.NOT_SEEN_STOPPED: "not seen terminated within the grace period and the margin after it",
    ReportGap.GONE_UNSEEN: "the pod was removed before its terminated state was seen",
}


@dataclass(frozen=True)
class UnreadReport:
    """The report of member ``rank`` (``None``: a pod without a rank label) was not read: ``gap``
    says why, ``detail`` what was seen (an API error, the wait's length); plain values."""

    rank: int | None
    gap: ReportGap
    detail: str = ""

    def describe(self) -> str:
        """One sentence for the log."""
        who = "a member without a rank" if self.rank is None else f"rank {self.rank}"
        detail = f" ({self.detail})" if self.detail else ""
        return f"the checkpoint report of {who} was not read: {_GAP_TEXT[self.gap]}{detail}"

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "gap": self.gap.value, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnreadReport:
        return cls(**record_values(cls, data, {"rank": int, "gap": ReportGap}))


def summarize(unread: Sequence[UnreadReport]) -> str:
    """The ranks of ``unread`` grouped by why: ``ranks [0, 2] (not stopped: ...); ranks [5] (...)``."""
    groups: dict[ReportGap, list[int | None]] = {}
    for item in unread:
        groups.setdefault(item.gap, []).append(item.rank)
    return "; ".join(f"ranks [{_ranks(ranks)}] ({_GAP_TEXT[gap]})" for gap, ranks in groups.items())


def _ranks(ranks: list[int | None]) -> str:
    known = sorted(rank for rank in ranks if rank is not None)
    return ", ".join([*(str(rank) for rank in known), *("?" for rank in ranks if rank is None)])


def since_report(tries: Sequence[tuple[int, Sequence[UnreadReport]]]) -> str:
    """For a plan line: which of ``tries`` (attempt, its unread reports; the tries after the last
    checkpoint reported, oldest first) could not read which reports; ``""`` when all were read."""
    return "; ".join(
        f"try {attempt} could not read the reports of {summarize(unread)}" for attempt, unread in tries if unread
    )

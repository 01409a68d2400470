"""What earlier tries of this task instance did, kept across tries in Airflow's task state store.

XComs of a task instance are cleared when a new try starts, and ``dag.test()`` drops ``defer()``
kwargs (``next_kwargs = {"event": ...}`` in ``DAG.test``, apache/airflow
``task-sdk/src/airflow/sdk/definitions/dag.py``), so neither can carry the fallback history. Airflow 3.3's
``task_state_store`` (``context["task_state_store"]``, keyed by dag, run, task and map index, not by
try) survives retries and worker crashes, which is what the ladder and the summed GPU-hours need.

Two keys are written, both by ``operators.lifecycle`` only:

- ``gang.tries``: a list of finished-try records (:class:`TryRecord` as dicts), appended once per try;
- ``gang.current``: the try in progress (``operators.try_state.TryState``), written before the first
  object is created, so a worker that dies and a retry that follows know what to withdraw or adopt.

The store is the only place the history lives: a context without one (not a task runner's) is
refused with ``RuntimeError`` rather than kept in a process that a retry does not share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_gang.reservation import fallback
from airflow_provider_gang.reservation.phases import Reason, is_ladder_input

TRIES_KEY = "gang.tries"
CURRENT_KEY = "gang.current"


@dataclass(frozen=True)
class TryRecord:
    """The outcome of one finished try (a stored format: add fields with defaults, never rename).

    ``outcome`` is a ``reservation.phases.Reason`` value; ``step`` describes the fallback step the
    try used and ``step_index`` is its ladder position (``None``: as configured); seconds are
    ``None`` when the try never reached that stage; ``gpu_seconds_*`` come from ``reservation.cost``;
    ``exit_codes`` maps rank (as a string: JSON keys) to exit code.
    """

    attempt: int
    gang: str
    step: str
    step_index: int | None
    mode: str
    size: int
    outcome: str
    message: str
    retryable: bool
    queue_seconds: float | None = None
    provisioning_seconds: float | None = None
    run_seconds: float | None = None
    gpu_seconds_reserved: float = 0.0
    gpu_seconds_used: float = 0.0
    gpu_seconds_idle: float = 0.0
    exit_codes: dict[str, int] = field(default_factory=dict)
    ladder: list[dict[str, Any]] | None = None
    """The ladder ``step_index`` points into (``reservation.ladder_format.ladder_to_plain``); ``None`` in
    records written before it was kept."""
    adopted_from: int | None = None
    """The try whose gang this try adopted after that try's worker stopped, if any."""
    checkpoint_step: int | None = None
    """The latest checkpoint step this try's members reported (``reservation.checkpoint``); ``None``:
    none reported, or no ``checkpoint``, or a record written before checkpoints were kept."""
    checkpoint_progress: int | None = None
    """The last step completed when that report was written (``>= checkpoint_step``)."""
    resumed_from_step: int | None = None
    """The checkpoint step this try resumed from (``GANG_RESUME_STEP``); ``None``: it started afresh."""
    gpu_seconds_lost: float = 0.0
    """GPU-seconds of a failed try with a ``checkpoint`` that a later try redoes (``checkpoint.split_work``)."""
    gpu_seconds_saved: float = 0.0
    """GPU-seconds of a failed try's checkpointed steps, which a resuming try does not redo."""
    exit_code_decision: dict[str, Any] | None = None
    """When the exit-code policy decided ``outcome``: ``{"rank", "exit_code", "rule", "reason"}``
    (``reservation.exit_codes.ExitCodeVerdict.to_dict``); ``None`` otherwise."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TryRecord:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


class TryHistory:
    """Read and write the two keys for the task instance of ``context``."""

    def __init__(self, context: Mapping[str, Any]) -> None:
        store = context.get("task_state_store")
        if store is None:
            raise RuntimeError(
                "the context has no task_state_store: the gang operator keeps its tries in Airflow's "
                "task state store (Airflow 3.3 or later)"
            )
        self._store = store

    def _get(self, key: str, default: Any) -> Any:
        return self._store.get(key, default=default)

    def _set(self, key: str, value: Any) -> None:
        self._store.set(key, value)

    def _delete(self, key: str) -> None:
        self._store.delete(key)

    def finished(self) -> list[TryRecord]:
        """Records of every finished try, oldest first."""
        return [TryRecord.from_dict(item) for item in self._get(TRIES_KEY, []) or []]

    def record(self, record: TryRecord, *, drop_current: bool) -> None:
        """Append ``record`` unless this try already has one (a resumed worker may finish twice), then
        remove the record of the try in progress if ``drop_current`` (it is ``record``'s try)."""
        existing = self._get(TRIES_KEY, []) or []
        if not any(item.get("attempt") == record.attempt for item in existing):
            self._set(TRIES_KEY, [*existing, record.to_dict()])
        if drop_current:
            self._delete(CURRENT_KEY)

    def current(self) -> dict[str, Any] | None:
        """The stored record of the try in progress (``operators.try_state``), or ``None``."""
        value = self._get(CURRENT_KEY, None)
        return dict(value) if isinstance(value, Mapping) else None

    def store_current(self, value: Mapping[str, Any]) -> None:
        """Replace the record of the try in progress."""
        self._set(CURRENT_KEY, dict(value))


def outcomes(records: list[TryRecord]) -> list[fallback.TryOutcome]:
    """The history ``reservation.fallback.choose_step`` reads."""
    return [
        fallback.TryOutcome(item.attempt, item.step_index, Reason(item.outcome), item.message)
        for item in records
        if is_ladder_input(Reason(item.outcome))
    ]


def totals(records: list[TryRecord]) -> dict[str, float]:
    """GPU-hours reserved, used and idle, summed over ``records`` (failed tries included)."""
    return {
        "gpu_hours_reserved": round(sum(item.gpu_seconds_reserved for item in records) / 3600, 6),
        "gpu_hours_used": round(sum(item.gpu_seconds_used for item in records) / 3600, 6),
        "gpu_hours_idle": round(sum(item.gpu_seconds_idle for item in records) / 3600, 6),
    }


def checkpoint_totals(records: list[TryRecord]) -> dict[str, float]:
    """GPU-hours lost to failed tries (work since their last checkpoint, redone) and saved by resuming
    (their checkpointed work, not redone), summed over ``records``."""
    return {
        "gpu_hours_lost": round(sum(item.gpu_seconds_lost for item in records) / 3600, 6),
        "gpu_hours_saved": round(sum(item.gpu_seconds_saved for item in records) / 3600, 6),
    }


def describe_tries(records: list[TryRecord]) -> str:
    """One line per try for the final failure message: its step and outcome."""
    return "; ".join(
        f"try {item.attempt} [{item.step}, {item.mode}, size {item.size}]: {item.outcome} ({item.message})"
        for item in records
    )

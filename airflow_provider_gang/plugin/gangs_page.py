"""The Gangs page as typed values: one row per gang task instance, across DAGs.

Built from the rows ``plugin.try_history.read_gang_rows`` reads (``gang.current`` and ``gang.tries``
of the task state store, or of the history ConfigMaps on Airflow 3.1 and 3.2, read as
``reservation.records.tries`` records) and, for the waiting and running ones, the conditions
``plugin.live.read_conditions_by_task`` read with one LIST per kind per (cluster, namespace).
Pure: time is a parameter (``now``), nothing here reads the database or the cluster.

A row's ``phase``, what the state filter selects by:

- ``waiting``: a try in progress that has not launched its members (deferred for its reservation,
  or on a worker preparing it);
- ``running``: a try in progress whose members are launched;
- ``retrying`` (``up_for_retry``), ``succeeded``, ``failed``: the task instance's state;
- ``other``: anything else (a cleared task, a gang of a newer provider whose records do not read).

Rows are sorted by how long the gang waited for its reservation, longest first: the question of a
platform team on a busy night is "who has waited longest, for what".
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.links import reservation_page_url
from airflow_provider_gang.plugin import wording
from airflow_provider_gang.plugin.stored_records import GangTaskRow, TaskKey
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.records.reading import RecordError
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState

PHASES = ("waiting", "running", "retrying", "succeeded", "failed", "other")
"""The values of the state filter, in the order the counts are shown."""


STATE_PHASES = {"up_for_retry": "retrying", "success": "succeeded", "failed": "failed"}


REFRESH_SECONDS = 15


PARSED_RECORDS_CACHE_SIZE = 2048
"""How many (``gang.tries``, ``gang.current``) texts keep their parsed records between requests."""


@dataclass(frozen=True)
class Row:
    """One gang task instance as the table shows it (every value text) plus its sort key."""

    phase: str
    dag_id: str
    task_id: str
    run_id: str
    url: str
    attempt: str
    mode: str
    size: str
    waited: str
    waited_seconds: float
    place: str
    condition: str
    gpu_hours: str


@dataclass(frozen=True)
class Overview:
    """The page: filtered and sorted ``rows``, the count of each phase before filtering, the DAGs
    the filter offers and the filter applied (``""``: all)."""

    rows: tuple[Row, ...]
    counts: tuple[tuple[str, int], ...]
    dag_ids: tuple[str, ...]
    phase_filter: str
    dag_filter: str
    refresh_seconds: int = REFRESH_SECONDS


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def read_records(row: GangTaskRow) -> tuple[list[TryRecord], TryState | None]:
    """The finished tries and the try in progress of a row; unreadable items are left out."""
    records, current = _parse_stored(row.stored.get(task_state.TRIES_KEY), row.stored.get(task_state.CURRENT_KEY))
    return list(records), current


@functools.lru_cache(maxsize=PARSED_RECORDS_CACHE_SIZE)
def _parse_stored(tries_text: str | None, current_text: str | None) -> tuple[tuple[TryRecord, ...], TryState | None]:
    """The records two stored texts hold, memoized on the texts: the records are frozen, a finished
    task's texts never change and a waiting task's change once per try, while the page reloads
    every :data:`REFRESH_SECONDS` - so a reload parses only what changed since the last one.
    Parsing (a ``GangSpec`` with its checks per record) is most of a cold page's time."""
    records = []
    stored = _loads(tries_text)
    for item in stored if isinstance(stored, list) else []:
        try:
            records.append(TryRecord.from_dict(item))
        except RecordError:
            continue
    try:
        current = task_state.read_current(_loads(current_text))
    except RecordError:
        current = None
    if current is not None and any(record.attempt == current.plan.attempt for record in records):
        current = None  # recorded as finished; ``gang.current`` is about to be dropped
    return tuple(records), current


def build_row(row: GangTaskRow, *, now: float, condition: str | None, unread: str | None = None) -> Row:
    """One row; ``condition`` is what the cluster says now (``None``: not read); ``unread`` why the
    row's try history could not be read (``plugin.try_history``), said where its last outcome goes."""
    records, current = read_records(row)
    used = sum(record.gpu_seconds_used for record in records)
    last = records[-1] if records else None
    unfinished = row.state not in task_state.FINAL_TASK_STATES and row.state != "up_for_retry"
    if current is not None and unfinished:
        plan, spec = current.plan, current.plan.spec
        launched = current.launched_at is not None
        phase = "running" if launched else "waiting"
        waited = (current.launched_at if launched else now) - plan.requested_at  # type: ignore[operator]
        event = current.reservation_event
        stored_condition = event.message if event is not None else "reservation requested, no answer yet"
        return Row(
            phase=phase,
            dag_id=row.dag_id,
            task_id=row.task_id,
            run_id=row.run_id,
            url=reservation_page_url(*row.key),
            attempt=str(plan.attempt),
            mode=spec.mode.value.replace("_", " "),
            size=wording.members(current.size_run or spec.size),
            waited=wording.duration(waited) + ("" if launched else " so far"),
            waited_seconds=max(0.0, waited),
            place=_with(
                wording.place_of(spec.zone, spec.queue, spec.provisioning_class, wording.worker_of(current)),
                wording.pinned(spec),
            ),
            condition=_with(condition or stored_condition, "" if launched else current.topology_note or ""),
            gpu_hours=wording.gpu_hours(used) + " used",
        )
    phase = STATE_PHASES.get(row.state or "", "other")
    return Row(
        phase=phase,
        dag_id=row.dag_id,
        task_id=row.task_id,
        run_id=row.run_id,
        url=reservation_page_url(*row.key),
        attempt=str(last.attempt) if last else str(row.try_number or "none"),
        mode=last.mode.replace("_", " ") if last else "not recorded",
        size=wording.members(last.size) if last else "not recorded",
        waited=wording.duration(last.queue_seconds, missing="never granted") if last else "not recorded",
        waited_seconds=(last.queue_seconds or 0.0) if last else 0.0,
        place=finished_place(last) if last else "not recorded",
        condition=(
            f"{wording.reason(last.outcome)}: {last.message}" if last and last.message else wording.reason(last.outcome)
        )
        if last
        else unread or f"task {str(row.state or 'not scheduled').replace('_', ' ')}",
        gpu_hours=wording.gpu_hours(used) + " used",
    )


def finished_place(record: TryRecord) -> str:
    """Where a finished try ran (zone / queue / class, and where its ranks ran by topology), or its
    fallback step for a record written before the place was kept (``TryRecord.requested_at`` marks a
    record that has it)."""
    if record.requested_at is None:
        return f"step: {record.step}"
    place = wording.place_of(record.zone, record.queue, record.provisioning_class, record.worker_cluster)
    return _with(place, wording.ran_in(record))


def _with(text: str, more: str) -> str:
    """``text; more`` (``text`` alone when ``more`` is empty)."""
    return f"{text}; {more}" if more else text


def build_overview(
    rows: Sequence[GangTaskRow],
    *,
    now: float,
    conditions: Mapping[TaskKey, str] | None = None,
    phase_filter: str = "",
    dag_filter: str = "",
    unread: Mapping[TaskKey, str] | None = None,
) -> Overview:
    """The page from :func:`.stored_records.read_gang_tasks`' rows; ``conditions`` and ``unread``
    (why a row's history could not be read) by task key."""
    conditions, unread = conditions or {}, unread or {}
    built = [build_row(row, now=now, condition=conditions.get(row.key), unread=unread.get(row.key)) for row in rows]
    counts = tuple((phase, sum(1 for row in built if row.phase == phase)) for phase in PHASES)
    shown = [
        row
        for row in built
        if (not phase_filter or row.phase == phase_filter) and (not dag_filter or row.dag_id == dag_filter)
    ]
    shown.sort(key=lambda row: (-row.waited_seconds, row.dag_id, row.run_id, row.task_id))
    return Overview(
        rows=tuple(shown),
        counts=counts,
        dag_ids=tuple(sorted({row.dag_id for row in rows})),
        phase_filter=phase_filter,
        dag_filter=dag_filter,
    )

"""The Gang page as typed values: what the stored formats say, read once, formatted for a person.

It takes the records :mod:`.stored_records` reads (the try records, the try in progress, a gang
trigger's row) and the reservation and summary XComs (``operators.starting`` and
``reservation.tries.results`` write them); :func:`build_page` turns them into a :class:`Page`
whose every value is already text; the template
(:mod:`.rendering`) only places and escapes it. Time is a parameter (``now``); nothing here reads
the database or the cluster.

What the page says, top to bottom:

- the status line: where the gang of the task instance is, from its state and the method a
  deferred try resumes in (:data:`RESUME_METHODS`), and for a failed task why its last try ended;
- "Waiting": what the try in progress waits for, since when, and the conditions its reservation
  waits on as read live from the cluster (:mod:`.live`);
- the reservation XCom, then either the summary of a successful task (result, exit codes by rank,
  GPU-hours of all tries, every try's step and outcome) or the table of finished tries.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.operators.training import GangTrainingOperator
from airflow_provider_gang.plugin import task_view, timeline, topology_text, units
from airflow_provider_gang.plugin.queries import StoredTaskState, TaskInstanceRow
from airflow_provider_gang.plugin.stored_records import read_current, read_tries
from airflow_provider_gang.reservation import multikueue
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState
from airflow_provider_gang.triggers.progress import describe_elapsed

log = logging.getLogger(__name__)

RESUME_METHODS = {
    GangTrainingOperator.execute_reserved.__name__: (
        "Waiting for capacity: the reservation is requested, the task is deferred until it is granted"
    ),
    GangTrainingOperator.execute_finished.__name__: "Running: the gang is launched and watched as one until it ends",
}
"""``GangTrainingOperator`` methods a deferred try resumes in, and what waiting for each one means."""

STATE_TEXT = {
    "success": "Succeeded",
    "failed": "Failed",
    "up_for_retry": "Failed; waiting for the next try",
    "running": "Running on a worker (preparing the reservation or launching the members)",
    "queued": "Queued for a worker",
    "scheduled": "Scheduled",
}
"""The status line of a task instance in a state other than ``deferred``; any other state is shown
by its name."""

REFRESH_SECONDS = 10
"""How often the page of an unfinished gang reloads itself: the UI does not reload a tab's iframe
when it refreshes the task instance around it (seen in a browser: the shell said Success while the
tab still said Running)."""

TRIES_COLUMNS = ("try", "step", "mode", "size", "outcome", "reason / message")
"""Header of the table of finished tries (one :class:`TryRow` each)."""


@dataclass(frozen=True)
class Table:
    """A titled two-column table: ``rows`` are ``(label, text)`` pairs, in order."""

    title: str
    rows: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class TryRow:
    """One finished try in the table of tries: the texts of :data:`TRIES_COLUMNS`, in order."""

    cells: tuple[str, str, str, str, str, str]


@dataclass(frozen=True)
class SummaryTry:
    """One try as the summary of a successful task lists it; ``message`` ``None``: none recorded."""

    attempt: str
    step: str
    outcome: str
    message: str | None


@dataclass(frozen=True)
class Page:
    """Everything the page shows, as text.

    ``status`` is ``None`` when the task instance was not looked up; ``refresh_seconds`` is ``None``
    for a page that does not reload itself (finished or missing task instance). ``tables`` follow
    the status line in order ("Waiting", "Reservation", "Result", "Exit codes", "All tries ..."; each
    only when there is something to show). ``summary_tries`` is ``None`` without a summary, and then
    ``tries`` lists the finished tries from the task state store. ``history_unread`` says why the
    try history could not be read (Airflow 3.1 and 3.2 keep it on the cluster: ``plugin.try_history``).
    """

    dag_id: str
    run_id: str
    task_id: str
    status: str | None = None
    refresh_seconds: int | None = None
    tables: tuple[Table, ...] = ()
    nothing_recorded: bool = False
    summary_tries: tuple[SummaryTry, ...] | None = None
    tries: tuple[TryRow, ...] = field(default=())
    tries_columns: tuple[str, ...] = TRIES_COLUMNS
    headline: str = ""
    timeline: timeline.Timeline | None = None
    gpu_bars: tuple[task_view.GpuBar, ...] = ()
    members: tuple[task_view.Member, ...] = ()
    failure: str | None = None
    members_title: str = ""
    members_note: str = ""
    domain_label: str = ""
    """The topology label whose domain the members table shows per rank (``""``: no such column)."""
    state: str = "unknown"
    log_url: str | None = None
    history_unread: str | None = None


def describe_state(state: str | None, next_method: str | None, *, exists: bool = True) -> str:
    """One line for a person: where the gang of a task instance is, from its state and resume method."""
    if not exists:
        return "No such task instance"
    if state is None:
        return "Not scheduled yet"
    if state == "deferred":
        return RESUME_METHODS.get(next_method or "", f"Deferred (resumes in {next_method})")
    return STATE_TEXT.get(state, state.replace("_", " ").capitalize())


def is_finished(task_instance: TaskInstanceRow) -> bool:
    """Whether the task instance is missing or in a final state: no refresh, no live read."""
    return not task_instance.exists or task_instance.state in task_state.FINAL_TASK_STATES


EMPTY_TEXT = {"zone": "any zone", "queue": "no queue", "provisioning_class": "default class"}
"""What an absent value of these keys means; other absent values read "not set"."""


def text_of(value: Any, key: str = "") -> str:
    """A stored value for a person: seconds and GPU-hours in units (:mod:`.units`, by the key's
    suffix), an absent value in words, other floats to three significant digits."""
    if key.endswith("_seconds"):
        return units.duration(value)
    if key.startswith("gpu_hours"):
        return units.gpu_hours(None if value is None else float(value) * units.SECONDS_PER_HOUR)
    if value is None:
        return EMPTY_TEXT.get(key, "not set")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def waiting_table(current: TryState, tries: Sequence[TryRecord], *, now: float, conditions: str | None) -> Table | None:
    """What the try in progress waits for and for how long, or ``None`` when it has finished (a
    record of it exists: ``TryHistory.record`` appends the record before it drops ``gang.current``);
    ``conditions`` as :func:`.live.read_live_conditions` read them."""
    plan = current.plan
    if any(record.attempt == plan.attempt for record in tries):
        return None
    if current.launched_at is not None:
        stage, since = "members launched, waiting for them to start and end", current.launched_at
    else:
        stage, since = "reservation requested, waiting for it to be granted", plan.requested_at
    event = current.reservation_event
    rows = {
        "try": plan.attempt,
        "gang": plan.gang,
        "step": plan.step,
        "cluster": plan.kubernetes_conn_id,
        "stage": stage,
        "waiting for": describe_elapsed(max(0.0, now - since)),
        "reservation": "not granted yet" if event is None else f"{event.reason.value}: {event.message}",
        **({} if current.multikueue is None else {"MultiKueue worker": worker_text(current)}),
        "conditions now": conditions or "not read (no gang trigger to read them from)",
        **topology_text.waiting_rows(current),
        "history": "in the task log (a line on every condition change, a heartbeat every 5 min)",
    }
    return Table("Waiting", tuple((label, text_of(value)) for label, value in rows.items()))


def worker_text(current: TryState) -> str:
    """The MultiKueue worker of the try in progress and how it is followed (``reservation.multikueue``)."""
    dispatch = current.multikueue
    assert dispatch is not None
    if dispatch.worker is None:
        return f"none admitted it yet (admission check {dispatch.admission_check!r})"
    if dispatch.worker_conn_id is None:
        return f"{dispatch.worker} - {multikueue.not_seen_note(dispatch.worker)}"
    return f"{dispatch.worker}, followed through connection {dispatch.worker_conn_id}"


def with_worker(step: str, worker: Any, conn_id: Any) -> str:
    """A try's step with the MultiKueue worker cluster it ran on (and the connection it was followed
    through), when its record names one."""
    if not worker:
        return step
    return f"{step} (MultiKueue worker {worker}, {f'connection {conn_id}' if conn_id else 'no connection'})"


def scalar_table(title: str, values: Mapping[str, Any]) -> Table:
    """The values of a stored mapping that are not themselves mappings or lists, in their order."""
    rows = tuple(
        (str(key).replace("_", " "), text_of(value, str(key)))
        for key, value in values.items()
        if not isinstance(value, (dict, list))
    )
    return Table(title, rows)


def summary_tables(summary: Mapping[str, Any]) -> list[Table]:
    """The summary XCom (``reservation.tries.results.summary``): its scalars, exit codes by rank (numeric
    order; ranks are JSON keys), and the GPU-hours of all tries."""
    tables = [scalar_table("Result", summary)]
    exit_codes = summary.get("exit_codes")
    if isinstance(exit_codes, dict):
        ordered = sorted(exit_codes.items(), key=lambda item: int(item[0]) if str(item[0]).isdigit() else -1)
        tables.append(Table("Exit codes", tuple((f"rank {rank}", text_of(code)) for rank, code in ordered)))
    all_tries = summary.get("all_tries")
    if isinstance(all_tries, dict):
        tables.append(scalar_table("All tries of this run (failed ones included)", all_tries))
    return tables


def summary_tries(summary: Mapping[str, Any]) -> tuple[SummaryTry, ...]:
    """The summary's ``tries`` (``reservation.tries.results.try_summary`` items), in order; steps name
    their cluster when the tries ran on several."""
    items = [item for item in summary.get("tries") or [] if isinstance(item, dict)]
    several = len({item.get("kubernetes_conn_id") for item in items if item.get("kubernetes_conn_id")}) > 1
    return tuple(
        SummaryTry(
            attempt=text_of(item.get("attempt")),
            step=with_worker(
                with_cluster(text_of(item.get("step")), item.get("kubernetes_conn_id") if several else None),
                item.get("worker_cluster"),
                item.get("worker_kubernetes_conn_id"),
            ),
            outcome=text_of(item.get("outcome")),
            message=str(item["message"]) if item.get("message") else None,
        )
        for item in items
    )


def with_cluster(step: str, conn_id: Any) -> str:
    """A try's step with the connection of the cluster it ran on, when its record names one."""
    return f"{step} (cluster {conn_id})" if conn_id else step


def several_clusters(tries: Sequence[TryRecord]) -> bool:
    """Whether the tries ran on more than one cluster (``reservation.fallback.OtherCluster``)."""
    return len({record.kubernetes_conn_id for record in tries if record.kubernetes_conn_id}) > 1


def try_row(record: TryRecord, *, name_cluster: bool = False) -> TryRow:
    """One finished try as the table of tries shows it (with ``name_cluster``, the step cell names
    the try's cluster: when the tries ran on several)."""
    values = (record.attempt, record.step, record.mode, record.size, record.outcome, record.message)
    attempt, step, mode, size, outcome, message = (text_of(value) for value in values)
    cluster = record.kubernetes_conn_id if name_cluster else None
    worker, conn_id = record.worker_cluster, record.worker_kubernetes_conn_id
    return TryRow((attempt, with_worker(with_cluster(step, cluster), worker, conn_id), mode, size, outcome, message))


def status_line(task_instance: TaskInstanceRow, tries: Sequence[TryRecord]) -> str:
    """:func:`describe_state` with the try number, and for a failed task how its last try ended."""
    status = describe_state(task_instance.state, task_instance.next_method, exists=task_instance.exists)
    if task_instance.try_number:
        status += f" (try {task_instance.try_number})"
    if tries and task_instance.state in ("failed", "up_for_retry"):
        last = tries[-1]
        status += f": try {last.attempt} ended {last.outcome} - {last.message}"
    return status


def build_page(
    dag_id: str,
    run_id: str,
    task_id: str,
    xcoms: Mapping[str, Any],
    task_instance: TaskInstanceRow | None = None,
    task_state: StoredTaskState | None = None,
    *,
    now: float,
    conditions: str | None = None,
    pods: Sequence[task_view.LivePod] | None = None,
    map_index: int = -1,
    past_tries: Sequence[int] = (),
    history_unread: str | None = None,
) -> Page:
    """The page of one task instance from what :mod:`.queries` read.

    ``xcoms`` is :func:`.queries.read_gang_xcoms`' answer; without ``task_instance`` there is no
    status line. While the task instance is not finished the page reloads itself every
    :data:`REFRESH_SECONDS`. From ``task_state``: a failed task's status line ends with its last
    try's outcome and message, every finished try is listed with its reason and drawn as a lane of
    the timeline (:mod:`.timeline`, the try in progress too), and an unfinished try's wait is shown
    ("Waiting", with ``conditions`` read live from the cluster). ``pods`` (listed live) fill the
    members table, else the last try's exit codes do (:func:`.task_view.members`). ``history_unread``:
    why ``task_state`` is empty although the task may have tries, shown as a note."""
    state = task_state or StoredTaskState()
    tries = read_tries(state.tries)
    current = read_current(state.current)
    status, refresh, headline, log_url = None, None, "", None
    if task_instance is not None:
        status = status_line(task_instance, tries)
        refresh = None if is_finished(task_instance) else REFRESH_SECONDS
        headline = task_view.headline(
            task_instance.state, task_instance.next_method, tries, current, now=now, exists=task_instance.exists
        )
        if task_instance.try_number:
            log_url = task_view.log_url(dag_id, run_id, task_id, map_index, task_instance.try_number)
    tables: list[Table] = []
    waiting = None if current is None else waiting_table(current, tries, now=now, conditions=conditions)
    if waiting is not None:
        tables.append(waiting)
    reservation, summary = xcoms.get("reservation"), xcoms.get("summary")
    if isinstance(reservation, dict):
        tables.append(scalar_table("Reservation", reservation))
    places: dict[int, str] = {}
    exit_codes: Mapping[str, Any] = tries[-1].exit_codes if tries else {}
    logged: frozenset[str] | None = None
    if isinstance(summary, dict):
        tables.extend(summary_tables(summary))
        if tries:
            where = (summary.get(key) for key in ("zone", "queue", "provisioning_class", "worker_cluster"))
            places[tries[-1].attempt] = timeline.place_of(*where)
        exit_codes = summary.get("exit_codes") or exit_codes
        logged = frozenset(str(rank) for rank in summary.get("rank_logs") or {})
    active = current if current is not None and all(r.attempt != current.plan.attempt for r in tries) else None
    failed = task_instance is not None and task_instance.state in ("failed", "up_for_retry")
    member_rows, members_title, members_note, domain_label = task_view.members_section(
        pods,
        active,
        tries,
        exit_codes,
        logged,
        lambda attempt: task_view.log_url(dag_id, run_id, task_id, map_index, attempt),
        task_finished=task_instance is not None and is_finished(task_instance),
    )
    return Page(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        status=status,
        refresh_seconds=refresh,
        tables=tuple(tables),
        nothing_recorded=not xcoms and not tries and history_unread is None,
        summary_tries=summary_tries(summary) if isinstance(summary, dict) else None,
        tries=tuple(try_row(record, name_cluster=several_clusters(tries)) for record in tries),
        headline=headline,
        timeline=timeline.build_timeline(
            tries,
            current,
            now=now,
            places=places,
            task_finished=task_instance is not None and is_finished(task_instance),
            other_tries=past_tries,
        ),
        gpu_bars=task_view.gpu_bars(tries),
        members=member_rows,
        members_title=members_title,
        members_note=members_note,
        domain_label=domain_label,
        failure=task_view.failure_text(tries, active) if failed else None,
        state=(task_instance.state or "none") if task_instance is not None and task_instance.exists else "unknown",
        log_url=log_url,
        history_unread=history_unread,
    )

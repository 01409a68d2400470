"""The Gang view of one task instance as typed values: what the stored formats say, read once,
formatted for a person.

It takes the records :mod:`.stored_records` reads (the try records, the try in progress, a gang
trigger's row) and the reservation and summary XComs (``operators.starting`` and
``reservation.tries.results`` write them); :func:`build_page` turns them into a :class:`Page` whose
every value is already text; the template (:mod:`.rendering`) only places and escapes it. Time is a
parameter (``now``); nothing here reads the database or the cluster. The timeline is
:mod:`.timeline`'s and the members table :mod:`.members_table`'s; this module owns the rest of the
page, top to bottom:

- the status line and the header sentence: where the gang of the task instance is, from its state
  and the method a deferred try resumes in (:data:`RESUME_METHODS`), and for a failed task why its
  last try ended;
- "Waiting": what the try in progress waits for, since when, and the conditions its reservation
  waits on as read live from the cluster (:mod:`.live`);
- the reservation XCom, then either the summary of a successful task (result, exit codes by rank,
  GPU-hours of all tries, every try's step and outcome) or the table of finished tries, and the
  GPU-hours of each try as bars.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from airflow_provider_gang.plugin import members_table, timeline, wording
from airflow_provider_gang.plugin.stored_records import StoredTaskState, TaskInstanceRow, read_current, read_tries
from airflow_provider_gang.reservation import multikueue
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState
from airflow_provider_gang.triggers.progress import describe_elapsed

RESERVED_METHOD = "execute_reserved"
"""``GangTrainingOperator.execute_reserved``: the task instance's ``next_method`` while a try waits for
its reservation (``tests/unit/operators/test_links_and_plugin.py`` holds the names to the operator's)."""
FINISHED_METHOD = "execute_finished"
"""``GangTrainingOperator.execute_finished``: the ``next_method`` while a try's members run."""


RESUME_METHODS = {
    RESERVED_METHOD: "Waiting for capacity: the reservation is requested, the task is deferred until it is granted",
    FINISHED_METHOD: "Running: the gang is launched and watched as one until it ends",
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


BAR_WIDTH = 240
"""Pixels of the widest GPU-hours bar (the largest "reserved" figure of the task)."""


@dataclass(frozen=True)
class GpuBar:
    """One try's GPU-hours: the three figures as text and as bar widths in pixels."""

    attempt: int
    reserved: str
    used: str
    idle: str
    reserved_width: float
    used_width: float
    idle_width: float


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
    gpu_bars: tuple[GpuBar, ...] = ()
    members: tuple[members_table.Member, ...] = ()
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
    """A stored value for a person: seconds and GPU-hours in units (:mod:`.wording`, by the key's
    suffix), an absent value in words, other floats to three significant digits."""
    if key.endswith("_seconds"):
        return wording.duration(value)
    if key.startswith("gpu_hours"):
        return wording.gpu_hours(None if value is None else float(value) * wording.SECONDS_PER_HOUR)
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
        **wording.waiting_rows(current),
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


def headline(
    state: str | None,
    next_method: str | None,
    records: Sequence[TryRecord],
    current: TryState | None,
    *,
    now: float,
    exists: bool = True,
) -> str:
    """One sentence: where the gang is and what happens next."""
    last = records[-1] if records else None
    active = unrecorded(current, records)
    if not exists:
        return "There is no such task instance."
    if state == "deferred" and next_method == RESERVED_METHOD and active is not None:
        spec = active.plan.spec
        where = f" in zone {spec.zone}" if spec.zone else ""
        waited = wording.duration(now - active.plan.requested_at)
        left = active.plan.reservation_deadline - now
        return (
            f"Try {active.plan.attempt} has waited {waited} for a reservation of {wording.members(spec.size)}{where};"
            f" the gang launches as soon as the cluster grants it, or the try gives up"
            f" ({wording.reason(active.plan.deadline_reason.value)}) in {wording.duration(left)}."
        )
    if state == "deferred" and next_method == FINISHED_METHOD and active is not None:
        since = wording.duration(now - (active.launched_at or active.plan.requested_at))
        return (
            f"Try {active.plan.attempt} runs {wording.members(active.size_run or active.plan.spec.size)},"
            f" launched {since} ago; the task ends when every member has exited (or one fails)."
        )
    if state == "success" and last is not None:
        return (
            f"Succeeded on try {last.attempt} after {wording.duration(last.run_seconds)} of running;"
            f" {wording.gpu_hours(sum(r.gpu_seconds_used for r in records))} used over {len(records)} "
            f"{'try' if len(records) == 1 else 'tries'}. Nothing more happens."
        )
    if state in ("failed", "up_for_retry") and active is not None:
        count = len(records) + 1
        return f"Failed after {count} {'try' if count == 1 else 'tries'}: {failure_text(records, active)}"
    if state == "failed" and last is not None:
        return f"Failed for good after {len(records)} {'try' if len(records) == 1 else 'tries'}: {failure_reason(last)}"
    if state == "up_for_retry" and last is not None:
        return f"{failure_reason(last)} Airflow starts try {last.attempt + 1} after the retry delay."
    if state in ("queued", "scheduled", "running", None):
        waiting = {"queued": "queued for a worker", "scheduled": "scheduled", "running": "running on a worker"}
        return f"The task is {waiting.get(state or '', 'not scheduled yet')}; no gang is waiting on the cluster yet."
    return f"The task is {str(state).replace('_', ' ')}."


def gpu_bars(records: Sequence[TryRecord]) -> tuple[GpuBar, ...]:
    """Reserved / used / idle GPU-hours of each finished try, widths scaled to the largest figure."""
    largest = max([record.gpu_seconds_reserved for record in records] + [1e-9])

    def width(seconds: float) -> float:
        return round(max(0.0, seconds) / largest * BAR_WIDTH, 1)

    return tuple(
        GpuBar(
            attempt=record.attempt,
            reserved=wording.gpu_hours(record.gpu_seconds_reserved),
            used=wording.gpu_hours(record.gpu_seconds_used),
            idle=wording.gpu_hours(record.gpu_seconds_idle),
            reserved_width=width(record.gpu_seconds_reserved),
            used_width=width(record.gpu_seconds_used),
            idle_width=width(record.gpu_seconds_idle),
        )
        for record in records
    )


def failure_reason(record: TryRecord) -> str:
    """Why a try failed, in words: the exit-code policy's decision when it made one
    (``reservation.exit_codes.ExitCodeVerdict.to_dict``), else the outcome and its message."""
    text = f"Try {record.attempt} ended: {wording.reason(record.outcome)}"
    decision = record.exit_code_decision
    if decision:
        rule = str(decision.get("rule") or "the exit-code policy").replace("_", " ")
        text += (
            f". Rank {decision.get('rank')} exited with code {decision.get('exit_code')};"
            f" {rule} decided: {wording.reason(str(decision.get('reason') or record.outcome))}"
        )
    if record.message:
        text += f". {record.message}"
    return text + ("" if text.endswith(".") else ".")


def failure_text(records: Sequence[TryRecord], unrecorded: TryState | None) -> str | None:
    """Why a failed task's last try failed: :func:`failure_reason` of its record, or for a try that
    has none (``gang.current`` left behind) that Airflow ended it and where to read why."""
    if unrecorded is not None:
        return (
            f"Try {unrecorded.plan.attempt} ended without recording how: Airflow ended the task instance"
            " (marked failed, or its worker stopped); the task log of that try says why."
        )
    return failure_reason(records[-1]) if records else None


def log_url(dag_id: str, run_id: str, task_id: str, map_index: int, attempt: int) -> str:
    """Airflow 3's log view of one try of the task instance (the UI's task-instance route, whose
    first tab is the log; ``try_number`` selects the try)."""
    path = f"/dags/{quote(dag_id)}/runs/{quote(run_id)}/tasks/{quote(task_id)}"
    if map_index >= 0:
        path += f"/mapped/{map_index}"
    return f"{path}?try_number={attempt}"


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
    pods: Sequence[members_table.LivePod] | None = None,
    map_index: int = -1,
    past_tries: Sequence[int] = (),
    history_unread: str | None = None,
) -> Page:
    """The page of one task instance from what :mod:`.stored_records` read.

    ``xcoms`` is :func:`.stored_records.read_gang_xcoms`' answer; without ``task_instance`` there is no
    status line. While the task instance is not finished the page reloads itself every
    :data:`REFRESH_SECONDS`. From ``task_state``: a failed task's status line ends with its last
    try's outcome and message, every finished try is listed with its reason and drawn as a lane of
    the timeline (:mod:`.timeline`, the try in progress too), and an unfinished try's wait is shown
    ("Waiting", with ``conditions`` read live from the cluster). ``pods`` (listed live) fill the
    members table, else the last try's exit codes do (:func:`.members_table.members_section`).
    ``history_unread``: why ``task_state`` is empty although the task may have tries, shown as a note."""
    state = task_state or StoredTaskState()
    tries, current = read_tries(state.tries), read_current(state.current)
    summary = xcoms.get("summary") if isinstance(xcoms.get("summary"), dict) else None

    def link_of(attempt: int) -> str:
        return log_url(dag_id, run_id, task_id, map_index, attempt)

    status = task_status(task_instance, tries, current, now=now, link_of=link_of)
    exit_codes, logged, places = last_try_facts(tries, summary)
    members, members_title, members_note, domain_label = members_table.members_section(
        pods, unrecorded(current, tries), tries, exit_codes, logged, link_of, task_finished=status.finished
    )
    return Page(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        status=status.line,
        refresh_seconds=status.refresh_seconds,
        tables=facts_tables(current, tries, xcoms, summary, now=now, conditions=conditions),
        nothing_recorded=not xcoms and not tries and history_unread is None,
        summary_tries=None if summary is None else summary_tries(summary),
        tries=tuple(try_row(record, name_cluster=several_clusters(tries)) for record in tries),
        headline=status.headline,
        timeline=timeline.build_timeline(
            tries, current, now=now, places=places, task_finished=status.finished, other_tries=past_tries
        ),
        gpu_bars=gpu_bars(tries),
        members=members,
        members_title=members_title,
        members_note=members_note,
        domain_label=domain_label,
        failure=failure_text(tries, unrecorded(current, tries)) if status.failed else None,
        state=status.state,
        log_url=status.log_url,
        history_unread=history_unread,
    )


@dataclass(frozen=True)
class TaskStatus:
    """What the page says of the task instance row (:func:`task_status`); the defaults: no row."""

    line: str | None = None
    refresh_seconds: int | None = None
    headline: str = ""
    log_url: str | None = None
    state: str = "unknown"
    finished: bool = False
    """Missing or in a final state (:func:`is_finished`)."""
    failed: bool = False
    """``failed`` or ``up_for_retry``: the page says why its last try failed."""


def task_status(
    task_instance: TaskInstanceRow | None,
    tries: Sequence[TryRecord],
    current: TryState | None,
    *,
    now: float,
    link_of: Callable[[int], str],
) -> TaskStatus:
    """The status line, the header sentence, whether the page reloads, the current try's log."""
    if task_instance is None:
        return TaskStatus()
    finished = is_finished(task_instance)
    return TaskStatus(
        line=status_line(task_instance, tries),
        refresh_seconds=None if finished else REFRESH_SECONDS,
        headline=headline(
            task_instance.state, task_instance.next_method, tries, current, now=now, exists=task_instance.exists
        ),
        log_url=link_of(task_instance.try_number) if task_instance.try_number else None,
        state=(task_instance.state or "none") if task_instance.exists else "unknown",
        finished=finished,
        failed=task_instance.state in ("failed", "up_for_retry"),
    )


def facts_tables(
    current: TryState | None,
    tries: Sequence[TryRecord],
    xcoms: Mapping[str, Any],
    summary: Mapping[str, Any] | None,
    *,
    now: float,
    conditions: str | None,
) -> tuple[Table, ...]:
    """The "Waiting" table (a try in progress), "Reservation" (its XCom), then the summary's tables."""
    waiting = None if current is None else waiting_table(current, tries, now=now, conditions=conditions)
    reservation = xcoms.get("reservation")
    return (
        *(() if waiting is None else (waiting,)),
        *((scalar_table("Reservation", reservation),) if isinstance(reservation, dict) else ()),
        *(() if summary is None else summary_tables(summary)),
    )


def last_try_facts(
    tries: Sequence[TryRecord], summary: Mapping[str, Any] | None
) -> tuple[Mapping[str, Any], frozenset[str] | None, dict[int, str]]:
    """The last try's exit codes, the ranks whose logs its task log has (``None``: not recorded) and
    its place by attempt: from the summary of a successful task (which has the place even where the
    record does not), else from the last record."""
    exit_codes: Mapping[str, Any] = tries[-1].exit_codes if tries else {}
    if summary is None:
        return exit_codes, None, {}
    places: dict[int, str] = {}
    if tries:
        where = (summary.get(key) for key in ("zone", "queue", "provisioning_class", "worker_cluster"))
        places[tries[-1].attempt] = wording.place_of(*where)
    logged = frozenset(str(rank) for rank in summary.get("rank_logs") or {})
    return summary.get("exit_codes") or exit_codes, logged, places


def unrecorded(current: TryState | None, records: Sequence[TryRecord]) -> TryState | None:
    """The try in progress unless it already has a record (``TryHistory.record`` appends the record
    before it drops ``gang.current``)."""
    if current is None or any(record.attempt == current.plan.attempt for record in records):
        return None
    return current

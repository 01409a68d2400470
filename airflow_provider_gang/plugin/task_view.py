"""The parts of the task's Gang view beyond the timeline, as text: the header sentence, GPU-hours per
try as bars, the members table and a failed try's reason in words. Pure functions; the values they
read are the try records (``reservation.records.tries``), the summary XCom
(``reservation.tries.results.summary``) and the pods :mod:`.live` listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from airflow_provider_gang.plugin import units
from airflow_provider_gang.reservation import multikueue
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState

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
class Member:
    """One row of the members table; ``log_url`` is set for the ranks whose logs the task log has."""

    rank: str
    pod: str
    node: str
    phase: str
    exit_code: str
    restarts: str
    log_url: str | None
    domain: str = ""
    """The domain of the gang's topology label the member ran in (or is pinned to); ``""``: none."""


@dataclass(frozen=True)
class LivePod:
    """What one LIST of the gang's pods says of a member (:func:`.live.read_pods`)."""

    rank: int | None
    name: str
    node: str | None
    phase: str | None
    exit_code: int | None
    restarts: int


def gpu_bars(records: Sequence[TryRecord]) -> tuple[GpuBar, ...]:
    """Reserved / used / idle GPU-hours of each finished try, widths scaled to the largest figure."""
    largest = max([record.gpu_seconds_reserved for record in records] + [1e-9])

    def width(seconds: float) -> float:
        return round(max(0.0, seconds) / largest * BAR_WIDTH, 1)

    return tuple(
        GpuBar(
            attempt=record.attempt,
            reserved=units.gpu_hours(record.gpu_seconds_reserved),
            used=units.gpu_hours(record.gpu_seconds_used),
            idle=units.gpu_hours(record.gpu_seconds_idle),
            reserved_width=width(record.gpu_seconds_reserved),
            used_width=width(record.gpu_seconds_used),
            idle_width=width(record.gpu_seconds_idle),
        )
        for record in records
    )


def failure_reason(record: TryRecord) -> str:
    """Why a try failed, in words: the exit-code policy's decision when it made one
    (``reservation.exit_codes.ExitCodeVerdict.to_dict``), else the outcome and its message."""
    text = f"Try {record.attempt} ended: {units.reason(record.outcome)}"
    decision = record.exit_code_decision
    if decision:
        rule = str(decision.get("rule") or "the exit-code policy").replace("_", " ")
        text += (
            f". Rank {decision.get('rank')} exited with code {decision.get('exit_code')};"
            f" {rule} decided: {units.reason(str(decision.get('reason') or record.outcome))}"
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


def members(
    pods: Sequence[LivePod] | None,
    exit_codes: Mapping[str, Any],
    logged_ranks: frozenset[str] | None,
    link: str,
    gang: str | None,
    *,
    record: TryRecord | None = None,
    pinned_domain: str = "",
) -> tuple[Member, ...]:
    """The members: from the live pods when they were listed (in ``pinned_domain`` when the try pinned
    them to one), else from the last try's exit codes, its ``record`` giving each rank's node and
    domain (the pods of a finished gang may be gone: ``on_finish``). ``link`` is the log view of that
    try, set on the ranks of ``logged_ranks`` (the summary's ``rank_logs``), or on every rank when which
    ranks the try copied is not recorded (``None``: ``log_ranks`` is not stored outside the summary)."""

    def linked(rank: object) -> str | None:
        return link if logged_ranks is None or str(rank) in logged_ranks else None

    if pods:
        ordered = sorted(pods, key=lambda pod: (pod.rank is None, pod.rank or 0, pod.name))
        return tuple(
            Member(
                rank="launcher" if pod.rank is None else str(pod.rank),
                pod=pod.name,
                node=pod.node or "not bound yet",
                phase=pod.phase or "unknown",
                exit_code=str(pod.exit_code)
                if pod.exit_code is not None
                else "still running"
                if pod.phase == "Running"
                else "not exited",
                restarts=str(pod.restarts),
                log_url=linked(pod.rank),
                domain=pinned_domain,
            )
            for pod in ordered
        )
    nodes = dict(record.rank_nodes) if record is not None else {}
    domains = dict(record.rank_domains) if record is not None else {}
    ordered_codes = sorted(exit_codes.items(), key=lambda item: int(item[0]) if str(item[0]).isdigit() else -1)
    return tuple(
        Member(
            rank=str(rank),
            pod=f"{gang}-{rank}" if gang else "removed",
            node=f"{nodes[str(rank)]} (pod removed)" if str(rank) in nodes else "pod removed",
            phase="Succeeded" if int(code) == 0 else "Failed",
            exit_code=str(code),
            restarts="not recorded",
            log_url=linked(rank),
            domain=domains.get(str(rank), ""),
        )
        for rank, code in ordered_codes
    )


def members_section(
    pods: Sequence[LivePod] | None,
    active: TryState | None,
    records: Sequence[TryRecord],
    exit_codes: Mapping[str, Any],
    logged_ranks: frozenset[str] | None,
    link_of: Callable[[int], str],
    *,
    task_finished: bool,
) -> tuple[tuple[Member, ...], str, str, str]:
    """The members table's rows, title, the note shown when it has no rows, and the topology label of
    its domain column (``""``: none): the live pods of the try in progress, else the last finished
    try's exit codes; ``link_of(attempt)`` is a try's log."""
    if active is not None:
        spec = active.plan.spec
        label = spec.topology_label or ""
        one = spec.placement.domains[0] if spec.placement is not None and len(spec.placement.domains) == 1 else ""
        if pods:
            rows = members(pods, {}, logged_ranks, link_of(active.plan.attempt), active.plan.gang, pinned_domain=one)
            return rows, f"Members of try {active.plan.attempt} (live)", "", label
        dispatch = active.multikueue
        unseen = _not_seen(dispatch.worker if dispatch is not None and not dispatch.worker_conn_id else None)
        if task_finished:
            note = "Not recorded: the try ended before it recorded its members."
        elif unseen:
            note = unseen
        elif active.launched_at is None:
            note = "None launched yet: the members start once the reservation is granted."
        else:
            note = "Launched; the cluster did not list them just now (the page reloads)."
        return (), f"Members of try {active.plan.attempt}", note, label
    if records:
        last = records[-1]
        rows = members(None, exit_codes, logged_ranks, link_of(last.attempt), last.gang, record=last)
        label = (last.required_topology or last.preferred_topology or "") if last.rank_domains else ""
        unmapped = last.worker_cluster if last.worker_cluster and not last.worker_kubernetes_conn_id else None
        note = _not_seen(unmapped) or "No member ran in this try (no exit codes recorded)."
        return rows, f"Members of try {last.attempt}", note, label
    return (), "", "", ""


def _not_seen(worker: str | None) -> str:
    """What the members table cannot show of a gang on a MultiKueue worker without a connection."""
    return "" if worker is None else f"Not visible: {multikueue.not_seen_note(worker)}."


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
    active = current if current is not None and all(r.attempt != current.plan.attempt for r in records) else None
    if not exists:
        return "There is no such task instance."
    if state == "deferred" and next_method == "execute_reserved" and active is not None:
        spec = active.plan.spec
        where = f" in zone {spec.zone}" if spec.zone else ""
        waited = units.duration(now - active.plan.requested_at)
        left = active.plan.reservation_deadline - now
        return (
            f"Try {active.plan.attempt} has waited {waited} for a reservation of {units.members(spec.size)}{where};"
            f" the gang launches as soon as the cluster grants it, or the try gives up"
            f" ({units.reason(active.plan.deadline_reason.value)}) in {units.duration(left)}."
        )
    if state == "deferred" and next_method == "execute_finished" and active is not None:
        since = units.duration(now - (active.launched_at or active.plan.requested_at))
        return (
            f"Try {active.plan.attempt} runs {units.members(active.size_run or active.plan.spec.size)},"
            f" launched {since} ago; the task ends when every member has exited (or one fails)."
        )
    if state == "success" and last is not None:
        return (
            f"Succeeded on try {last.attempt} after {units.duration(last.run_seconds)} of running;"
            f" {units.gpu_hours(sum(r.gpu_seconds_used for r in records))} used over {len(records)} "
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

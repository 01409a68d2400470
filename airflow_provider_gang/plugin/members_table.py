"""The members table of the Gang view: one row per member of the try in progress, from the pods the
cluster lists now (:func:`.live.read_live_pods`), else of the last finished try, from its record's
exit codes (``reservation.records.tries.TryRecord``) and the summary XCom
(``reservation.tries.results.summary``). Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.reservation import multikueue
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState


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

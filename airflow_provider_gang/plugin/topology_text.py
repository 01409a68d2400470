"""A topology gang in the Gang view and on the Gangs page, as text: where its members are pinned or
ran, and why a try waits. Pure; it reads the try's plan and state (``GangSpec.placement``,
``TryState.topology_note``) and the finished try's record (``TryRecord.rank_domains``)."""

from __future__ import annotations

from airflow_provider_gang.reservation.records.tries import TryRecord, TryState
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.topology import choice
from airflow_provider_gang.reservation.tries.results import describe_rank_domains


def kind_of(required: str | None, preferred: str | None) -> str:
    """``"required cloud.google.com/gce-topology-subblock"`` (or preferred); ``""`` without a topology."""
    if required:
        return f"required {required}"
    return f"preferred {preferred}" if preferred else ""


def pinned(spec: GangSpec) -> str:
    """Where a try's members go: ``"rack rack-y1"``, ``"racks rack-b1, rack-a2"``, ``"capacity asked in
    rack rack-z1"``, or who places them (Kueue, the kube-scheduler); ``""`` without a topology."""
    label = spec.topology_label
    if label is None:
        return ""
    placement = spec.placement
    if placement is None:
        placer = {"kueue": "Kueue places them", "workload": "the kube-scheduler places them"}
        return f"one {choice.noun(label)}, {placer.get(spec.mode.value, 'not pinned')}"
    nouns = choice.noun(label) + ("s" if len(placement.domains) > 1 else "")
    where = f"{nouns} {', '.join(placement.domains)}"
    return f"capacity asked in {where}" if placement.grows else where


def waiting_rows(current: TryState) -> dict[str, str]:
    """The Waiting table's rows of a topology gang: its topology, where it is pinned, what the room
    on the nodes said when the try began (why it waits: ``"no rack has room for 4 members ...; the
    best, rack-b1, has room for 2"``)."""
    spec = current.plan.spec
    kind = kind_of(spec.required_topology, spec.preferred_topology)
    if not kind:
        return {}
    rows = {"topology": kind, "pinned to": pinned(spec)}
    if current.topology_note:
        rows["room on the nodes"] = current.topology_note
    return rows


def ran_in(record: TryRecord) -> str:
    """Where a finished try's ranks ran (``"rack-y1: ranks 0-3"``); ``""`` without a topology or ranks."""
    if not (record.required_topology or record.preferred_topology) or not record.rank_domains:
        return ""
    return describe_rank_domains(record.rank_domains)

"""How the Gang pages word what they show: numbers in the units people read (``6.9 s``,
``1 h 02 min``, ``0.012 GPU-h``), where a gang is or ran (zone / queue / class / MultiKueue worker), and
where a topology gang's members are pinned or ran and why a try waits.

Pure functions of their arguments; both pages (:mod:`.gangs_page`, :mod:`.gang_view`) and the
timeline (:mod:`.timeline`) use them. An absent value is never shown as ``-``: each caller says what
its absence means (``"not reached"`` for a stage a try never got to, ``"none recorded"`` ...), through
the ``missing`` argument. The topology texts read the try's plan and state (``GangSpec.placement``,
``TryState.topology_note``) and the finished try's record (``TryRecord.rank_domains``).
"""

from __future__ import annotations

from airflow_provider_gang.reservation.records.tries import TryRecord, TryState
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.topology import choice
from airflow_provider_gang.reservation.tries.results import describe_rank_domains

SECONDS_PER_HOUR = 3600.0


def duration(seconds: float | None, *, missing: str = "not reached") -> str:
    """``"0.006 s"``, ``"6.9 s"``, ``"42 s"``, ``"12 min 05 s"``, ``"1 h 02 min"``, ``"3 d 4 h"``;
    ``missing`` for ``None``. Negative durations (clocks of two machines) count as zero."""
    if seconds is None:
        return missing
    seconds = max(0.0, float(seconds))
    if seconds < 0.1:
        return f"{seconds:.3f} s".replace("0.000 s", "0 s")
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    whole = round(seconds)
    minutes, second = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {second:02d} s"
    hours, minute = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minute:02d} min"
    days, hour = divmod(hours, 24)
    return f"{days} d {hour} h"


def gpu_hours(gpu_seconds: float | None, *, missing: str = "none recorded") -> str:
    """GPU-seconds as GPU-hours with two significant digits below 10 (``"0.012 GPU-h"``,
    ``"2.5 GPU-h"``), whole ones above (``"128 GPU-h"``); ``"0 GPU-h"`` for zero."""
    if gpu_seconds is None:
        return missing
    hours = max(0.0, float(gpu_seconds)) / SECONDS_PER_HOUR
    if hours == 0:
        return "0 GPU-h"
    if hours >= 10:
        return f"{hours:.0f} GPU-h"
    return f"{float(f'{hours:.2g}'):g} GPU-h"


def members(count: int | None, *, missing: str = "size unknown") -> str:
    """``"1 member"``, ``"8 members"``."""
    if count is None:
        return missing
    return f"{count} member" if count == 1 else f"{count} members"


def reason(value: str | None, *, missing: str = "no outcome recorded") -> str:
    """A stored ``reservation.phases.Reason`` value in words: ``member_lost`` -> ``member lost``."""
    if not value:
        return missing
    return value.replace("_", " ")


def place_of(zone: str | None, queue: str | None, provisioning_class: str | None, worker: str | None = None) -> str:
    """``"zone us-central1-b · queue team-a"``; ``"any zone"`` when nothing pins the gang; ``worker``:
    the Kueue MultiKueue worker cluster the queue dispatched the gang to (``"... · worker worker-2"``)."""
    parts = [f"zone {zone}" if zone else "any zone"]
    if queue:
        parts.append(f"queue {queue}")
    if provisioning_class:
        parts.append(f"class {provisioning_class}")
    if worker:
        parts.append(f"worker {worker}")
    return " · ".join(parts)


def worker_of(current: TryState) -> str | None:
    """The MultiKueue worker cluster the try in progress was admitted on, once known."""
    return None if current.multikueue is None else current.multikueue.worker


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

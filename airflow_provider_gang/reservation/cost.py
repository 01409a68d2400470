"""GPU-second accounting: what a gang held, what its members used, and the difference.

For one try:

- **reserved** = GPUs per member x members reserved x (released_at - reserved_at): capacity is ours
  from the moment the reservation is granted until the gang releases it (teardown or finish);
- **used** = sum over members of GPUs per member x the member's run time (container start to finish,
  clipped to the reservation window; a member still running counts until ``released_at``);
- **idle** = reserved - used (never negative): launch latency, stragglers, members that never ran.

A try that never got its reservation reserved nothing. :func:`total` sums tries, failed ones
included, which is what the XCom summary reports for the whole run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from airflow_provider_gang.reservation import template
from airflow_provider_gang.reservation.members import MemberStatus
from airflow_provider_gang.reservation.spec import GangSpec

SECONDS_PER_HOUR = 3600.0


def gpus_per_member(spec: GangSpec) -> int:
    """GPUs one member holds: ``resources.gpus`` or, when zero, what the template's container 0 asks."""
    return spec.resources.gpus or template.container_gpus(spec.pod_template, spec.resources.gpu_resource)


@dataclass(frozen=True)
class GpuSeconds:
    """GPU-seconds reserved, used and idle (see module docstring)."""

    reserved: float = 0.0
    used: float = 0.0
    idle: float = 0.0

    def __add__(self, other: GpuSeconds) -> GpuSeconds:
        return GpuSeconds(self.reserved + other.reserved, self.used + other.used, self.idle + other.idle)

    def as_hours(self) -> dict[str, float]:
        """GPU-hours, rounded to 4 decimals (for the XCom summary)."""
        return {
            "reserved": round(self.reserved / SECONDS_PER_HOUR, 4),
            "used": round(self.used / SECONDS_PER_HOUR, 4),
            "idle": round(self.idle / SECONDS_PER_HOUR, 4),
        }


def try_cost(
    *,
    gpus: int,
    members_reserved: int,
    reserved_at: float | None,
    released_at: float,
    members: Iterable[MemberStatus] = (),
) -> GpuSeconds:
    """GPU-seconds of one try. ``reserved_at`` is ``None`` when the reservation was never granted;
    ``released_at`` is when the gang let go (or ``now`` for a running try). Times are epoch seconds."""
    if reserved_at is None or gpus <= 0:
        return GpuSeconds()
    window = max(0.0, released_at - reserved_at)
    reserved = gpus * members_reserved * window
    used = 0.0
    for member in members:
        if member.started_at is None:
            continue
        start = max(member.started_at, reserved_at)
        end = min(member.finished_at if member.finished_at is not None else released_at, released_at)
        used += gpus * max(0.0, end - start)
    used = min(used, reserved)
    return GpuSeconds(reserved=reserved, used=used, idle=reserved - used)


def total(costs: Iterable[GpuSeconds]) -> GpuSeconds:
    """The sum over tries."""
    summed = GpuSeconds()
    for cost in costs:
        summed = summed + cost
    return summed

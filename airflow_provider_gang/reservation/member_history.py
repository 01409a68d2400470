"""What a run trigger remembers of each member between observations.

A member that is deleted, evicted or whose node goes away leaves no pod behind, so the observation
that ends the try shows the rank as missing, without the start time it had while it ran. GPU
accounting (``reservation.cost``) would then count the whole reservation of that member as idle.
:func:`carry_forward` keeps the last known start of every rank and gives a member that is now
missing or lost the time it ran: from that start to the moment the loss was observed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from airflow_provider_gang.reservation.members import MemberState, MemberStatus

_GONE = frozenset({MemberState.MISSING, MemberState.LOST})


def remember(started: Mapping[int, float], members: Sequence[MemberStatus]) -> dict[int, float]:
    """``started`` updated with the start time of every member of ``members`` that has one."""
    updated = dict(started)
    for member in members:
        if member.started_at is not None:
            updated[member.rank] = member.started_at
    return updated


def carry_forward(started: Mapping[int, float], members: Sequence[MemberStatus], *, now: float) -> tuple[
        MemberStatus, ...]:
    """``members`` with every missing or lost member that ran before given its start time and a
    finish at ``now`` (when its loss was seen), unless it has times of its own."""
    carried = []
    for member in members:
        if member.state in _GONE and member.started_at is None and member.rank in started:
            member = dataclasses.replace(member, started_at=started[member.rank],
                                         finished_at=member.finished_at if member.finished_at is not None else now)
        carried.append(member)
    return tuple(carried)

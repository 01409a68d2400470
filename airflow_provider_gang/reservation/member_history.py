"""What a run trigger remembers of each member between observations (:class:`RunMemory`).

A member that is deleted, evicted or whose node goes away leaves no pod behind, so the observation
that ends the try shows the rank as missing, without the start time it had while it ran. GPU
accounting (``reservation.cost``) would then count the whole reservation of that member as idle.
:func:`carry_forward` keeps the last known start of every rank and gives a member that is now
missing or lost the time it ran: from that start to the moment the loss was observed.

The same goes for other facts a deleted pod takes with it: that its spot node was preempted
(``Observed.spot_preempted_ranks``), the spot node it ran on (a member missing from a node found
shutting down, ``Observed.nodes_shutting_down``, was preempted with it) and the checkpoint its
termination message reported (``reservation.checkpoint``), of which the latest seen is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from airflow_provider_gang.reservation import checkpoint, cloud, members
from airflow_provider_gang.reservation.checkpoint import CheckpointReport
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.observed import Observed

_GONE = frozenset({MemberState.MISSING, MemberState.LOST})


def remember(started: Mapping[int, float], members: Sequence[MemberStatus]) -> dict[int, float]:
    """``started`` updated with the start time of every member of ``members`` that has one."""
    updated = dict(started)
    for member in members:
        if member.started_at is not None:
            updated[member.rank] = member.started_at
    return updated


def carry_forward(
    started: Mapping[int, float], members: Sequence[MemberStatus], *, now: float
) -> tuple[MemberStatus, ...]:
    """``members`` with every missing or lost member that ran before given its start time and a
    finish at ``now`` (when its loss was seen), unless it has times of its own."""
    carried = []
    for member in members:
        if member.state in _GONE and member.started_at is None and member.rank in started:
            member = dataclasses.replace(
                member,
                started_at=started[member.rank],
                finished_at=member.finished_at if member.finished_at is not None else now,
            )
        carried.append(member)
    return tuple(carried)


@dataclass
class RunMemory:
    """Facts of earlier observations of one wait (module docstring); :meth:`see` every observation,
    :meth:`ended` the members of the terminal decision."""

    read_checkpoints: bool = True
    """Whether termination messages are checkpoint reports (the gang has a ``checkpoint``)."""
    preemption_taints: tuple[str, ...] = cloud.GKE.preemption_taints
    """Node taint keys that mean "being reclaimed" (the gang's ``CloudProfile.preemption_taints``)."""
    started: dict[int, float] = field(default_factory=dict)
    preempted: frozenset[int] = frozenset()
    spot_nodes: dict[int, str] = field(default_factory=dict)
    """The last spot node each rank was seen on."""
    nodes_shutting_down: frozenset[str] = frozenset()
    """Spot nodes found with the termination taint or gone (:meth:`saw_nodes_shutting_down`)."""
    checkpoint: CheckpointReport | None = None
    warned: frozenset[str] = frozenset()
    """Warnings already given (a new set only when one is added: every waiting gang holds one)."""

    def see(self, observed: Observed) -> tuple[Observed, list[str]]:
        """``observed`` with the spot preemptions seen so far, and warnings not given before (a
        malformed termination message, naming its pod)."""
        observed = dataclasses.replace(observed, nodes_shutting_down=self.nodes_shutting_down)
        self.spot_nodes.update(members.spot_nodes(observed.pods, size=observed.size))
        present = {members.member_rank(pod) for pod in observed.pods}
        gone_with_node = {
            rank for rank, node in self.spot_nodes.items() if rank not in present and node in self.nodes_shutting_down
        }
        preempted = (
            members.spot_preemption(observed.pods, size=observed.size, nodes_shutting_down=self.nodes_shutting_down)[0]
            | gone_with_node
        )
        if not preempted <= self.preempted:  # a new set only when it grows: every waiting gang holds one
            self.preempted |= preempted
        warnings: list[str] = []
        for pod in observed.pods if self.read_checkpoints else ():
            report, problem = checkpoint.report_of_pod(pod, members.member_rank(pod))
            self.checkpoint = checkpoint.latest([self.checkpoint, report])
            if problem is not None and problem not in self.warned:
                self.warned |= {problem}
                warnings.append(problem)
        return dataclasses.replace(observed, spot_preempted_ranks=self.preempted), warnings

    def saw_nodes_shutting_down(self, nodes: frozenset[str]) -> None:
        """Record spot nodes read with a termination taint of :attr:`preemption_taints` or found deleted."""
        self.nodes_shutting_down |= nodes

    def remember(self, members_seen: Sequence[MemberStatus]) -> None:
        self.started = remember(self.started, members_seen)

    def ended(self, members_seen: Sequence[MemberStatus], *, now: float) -> tuple[MemberStatus, ...]:
        """The terminal decision's members with the run time of those lost (:func:`carry_forward`)."""
        return carry_forward(self.started, members_seen, now=now)

"""Ranks in topology order, placed right before the members are released or created, and where each ran.

**Placing ranks** (:func:`place_ranks`, ``gates`` and ``provisioning_request``): with the room read
again right before the members are released (gates) or created, the pinned domains are filled in the
placement's order, and within a domain host by host - the roomiest first, equal rooms by name - each
host taking as many consecutive ranks as fit. So consecutive ranks share a host, then a domain, as
Kueue's TopologyUngater orders an Indexed Job's completion indices over its assignment's domains
(``rankToDomainID``, sigs.k8s.io/kueue ``pkg/controller/tas/topology_ungater.go``). Each member gets
``kubernetes.io/hostname`` of its host in its node selector, beside the domain pin. When the domains
no longer hold the gang - another scheduler's pods took the room since the choice - the try ends
``topology_domain_full`` and no member is released or created.

**Where each rank ran** (:func:`rank_domains`): the value of the topology label on each member's node,
for the try's record, whichever mode placed it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.reservation.errors import PlacementRefused
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.topology import choice, labels
from airflow_provider_gang.reservation.topology.pins import Placement
from airflow_provider_gang.reservation.topology.room import NodeRoom, Resources, node_labels


@dataclass(frozen=True)
class RankPlace:
    """Where rank ``rank`` is placed: its ``domain`` (the value of the placement's label), its
    ``node`` and the ``host`` pinned (the node's ``kubernetes.io/hostname``; ``None``: the node has no
    such label, so the member is pinned to the domain only)."""

    rank: int
    domain: str
    node: str
    host: str | None


def place_ranks(
    rooms: Sequence[NodeRoom], placement: Placement, *, size: int, member: Resources
) -> tuple[RankPlace, ...]:
    """Ranks ``0..size-1`` over the placement's domains (module docstring); raises
    :class:`~reservation.errors.PlacementRefused` (``topology_domain_full``) when they no longer hold
    ``size`` members."""
    by_domain = {domain.value: domain for domain in choice.domains(rooms, placement.label, member)}
    places: list[RankPlace] = []
    for value in placement.domains:
        domain = by_domain.get(value)
        hosts = sorted(domain.nodes if domain else (), key=lambda node: (-node.members_fit(member), node.name))
        for node in hosts:
            for _ in range(min(node.members_fit(member), size - len(places))):
                places.append(RankPlace(len(places), value, node.name, node.labels.get(labels.HOSTNAME)))
    if len(places) < size:
        where = ", ".join(placement.domains)
        raise PlacementRefused(
            Reason.TOPOLOGY_DOMAIN_FULL,
            f"{choice.noun(placement.label)} {where} now has room for {len(places)} of the {size} members "
            f"({choice.describe_member(member)} each): pods of other schedulers took room since it was "
            "chosen; no member was released or created",
        )
    return tuple(places)


def rank_domains(
    members: Iterable[tuple[int, str | None]], nodes: Iterable[Mapping[str, Any]], label: str
) -> dict[int, str]:
    """``rank -> value of label`` on the node each member ran on (``members``: ``(rank, node name)``);
    a member without a node, or on a node without the label, is left out."""
    values = {str((node.get("metadata") or {}).get("name")): node_labels(node).get(label) for node in nodes}
    found = {}
    for rank, node_name in members:
        value = values.get(str(node_name)) if node_name else None
        if value is not None:
            found[rank] = value
    return found

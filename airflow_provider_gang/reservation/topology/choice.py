"""The domain a ``gates`` or ``provisioning_request`` gang is pinned to, chosen before anything of it exists.

:func:`choose` reads the room on the nodes a member may run on (:mod:`.room`) and decides, in this
order (the first that applies wins):

1. **Domains.** The values of the topology label on those nodes; a node without the label is in no
   domain. None at all: a required topology is refused (``no_topology_domain``: no node carries the
   label, so no domain can be pinned or grown), a preferred one is placed without a pin.
2. **A domain that holds the whole gang now** (its nodes' room, member by member, is at least the
   size): the one with the least room - the tightest fit, which leaves the roomier domains whole for
   bigger gangs (Kueue TAS's ``BestFit``, ``pkg/cache/scheduler/tas_flavor_snapshot.go``); equal
   rooms by value.
3. **A preferred topology** that several domains hold together: the fewest of them, roomiest first
   (equal rooms by value).
4. **Otherwise capacity is asked in one domain**: the roomiest (equal rooms by value), so the fewest
   new nodes are needed; the ProvisioningRequest's pod template pins it, and the autoscaler grows the
   node group whose nodes carry that value (a node group with no node yet is not seen: its label
   values are on no node).

The choice is a snapshot: other schedulers keep binding pods. Right before the members are released
or created the room is read again and the ranks are placed (:mod:`.ranks`); a domain that no longer
holds the gang then ends the try (``topology_domain_full``) before any member is bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_gang.reservation.errors import PlacementRefused
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.topology import labels
from airflow_provider_gang.reservation.topology.pins import Placement
from airflow_provider_gang.reservation.topology.room import PODS, NodeRoom, Resources

NOUNS: Mapping[str, str] = {
    labels.BLOCK: "block",
    labels.SUBBLOCK: "rack",
    labels.HOST: "host",
    labels.HOSTNAME: "host",
}
"""What a domain of a well-known label is called in messages; any other label's is ``"<label> domain"``."""
LISTED_DOMAINS = 6
"""How many domains a note names with their room (the roomiest)."""


def noun(label: str) -> str:
    return NOUNS.get(label, f"{label} domain")


@dataclass(frozen=True)
class Domain:
    """The eligible nodes carrying one value of the label, and how many members fit on them."""

    value: str
    nodes: tuple[NodeRoom, ...]
    room: int


def domains(rooms: Sequence[NodeRoom], label: str, member: Resources) -> tuple[Domain, ...]:
    """The domains of ``label`` among ``rooms``, in value order."""
    grouped: dict[str, list[NodeRoom]] = {}
    for node in rooms:
        value = node.labels.get(label)
        if value is not None:
            grouped.setdefault(value, []).append(node)
    return tuple(
        Domain(value, tuple(nodes), sum(node.members_fit(member) for node in nodes))
        for value, nodes in sorted(grouped.items())
    )


def describe_member(member: Resources) -> str:
    """``"1 nvidia.com/gpu, 2 cpu"``: what a member asks for, its GPUs and CPUs (memory and the pod
    count left out: they rarely decide)."""
    shown = [
        f"{amount.normalize():f} {name}"
        for name, amount in member.items()
        if name not in (PODS, "memory", "ephemeral-storage") and amount > 0
    ]
    return ", ".join(shown) or "no resources"


def rooms_note(found: Sequence[Domain]) -> str:
    """``"room: rack-b1 6, rack-a2 3, rack-a1 2"``: the roomiest domains and their room."""
    ranked = sorted(found, key=lambda domain: (-domain.room, domain.value))[:LISTED_DOMAINS]
    more = f" and {len(found) - LISTED_DOMAINS} more" if len(found) > LISTED_DOMAINS else ""
    return "room: " + ", ".join(f"{domain.value} {domain.room}" for domain in ranked) + more


def shortfall(label: str, size: int, member: Resources, found: Sequence[Domain]) -> str:
    """Why no domain holds the gang: ``"no rack has room for 4 members (1 nvidia.com/gpu each); the
    best, rack-b1, has room for 2"``."""
    best = min(found, key=lambda domain: (-domain.room, domain.value))
    return (
        f"no {noun(label)} has room for {size} members ({describe_member(member)} each); "
        f"the best, {best.value}, has room for {best.room}"
    )


def choose(rooms: Sequence[NodeRoom], *, label: str, required: bool, size: int, member: Resources) -> Placement | None:
    """The placement of a gang of ``size`` members each needing ``member`` (module docstring's order);
    ``None``: a preferred topology no node carries, placed without a pin. Raises
    :class:`~reservation.errors.PlacementRefused` for a required one no node carries."""
    found = domains(rooms, label, member)
    if not found:
        message = f"no node a member may run on carries the label {label}, so no {noun(label)} can hold the gang"
        if required:
            raise PlacementRefused(Reason.NO_TOPOLOGY_DOMAIN, message)
        return None
    holding = [domain for domain in found if domain.room >= size]
    if holding:
        best = min(holding, key=lambda domain: (domain.room, domain.value))
        note = f"{best.value} holds the {size} members ({rooms_note(found)})"
        return Placement(label, (best.value,), note=note)
    why = shortfall(label, size, member, found)
    if not required and sum(domain.room for domain in found) >= size:
        spread = _fewest(found, size)
        note = f"{why}: spread over {len(spread)} {noun(label)}s, {', '.join(spread)} ({rooms_note(found)})"
        return Placement(label, spread, note=note)
    grown = min(found, key=lambda domain: (-domain.room, domain.value)).value
    note = f"{why} ({rooms_note(found)})"
    return Placement(label, (grown,), grows=True, note=note)


def _fewest(found: Sequence[Domain], size: int) -> tuple[str, ...]:
    """The fewest domains that hold ``size`` members together, roomiest first (``found`` holds them:
    the loop ends before any domain without room)."""
    chosen: list[str] = []
    left = size
    for domain in sorted(found, key=lambda item: (-item.room, item.value)):
        if left <= 0:
            break
        chosen.append(domain.value)
        left -= domain.room
    return tuple(chosen)

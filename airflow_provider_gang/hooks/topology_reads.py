"""The cluster reads of a gang with a topology: the room on the nodes, and the nodes its ranks ran on.

- :func:`read_rooms`: one LIST of the nodes and one LIST of the pods of every namespace that are bound
  and not terminated (``spec.nodeName!=``, ``status.phase`` neither ``Succeeded`` nor ``Failed``; each
  pod kept only as far as its requests go), turned into room by ``reservation.topology.room``;
- :func:`choose_placement`: the domain ``reservation.topology.choice`` picks from them, before
  anything of a ``gates`` or ``provisioning_request`` gang is created;
- :func:`room_note`: what the same choice says for a ``kueue`` or ``workload`` gang, whose domain Kueue
  or the kube-scheduler picks - a line for the log and the Gang view, never a refusal;
- :func:`place_ranks`: the ranks over the pinned domains, right before the members are released or
  created (``reservation.topology.ranks``);
- :func:`places_at_launch`: where the ranks go when the reservation is granted - placed now over the
  pins (gates, provisioning_request), read from the bound members' nodes (workload) or from Kueue's
  topology assignment (kueue, ``reservation.topology.kueue_assignment``) - for the world ConfigMap;
- :func:`rank_domains`: the domain of the node every rank ran on, for the try's record.

Errors are the client's (``kube.errors``, raised once its retries are spent: the try ends
``cluster_unreachable``), ``reservation.errors.MalformedObject`` for an answer it cannot read
(``malformed_answer``) and ``reservation.errors.PlacementRefused`` for a gang that cannot be placed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.hooks import inspection
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import NODES, PODS, PODS_OF_EVERY_NAMESPACE, WORKLOADS
from airflow_provider_gang.reservation import members, naming
from airflow_provider_gang.reservation.errors import MalformedObject, PlacementRefused
from airflow_provider_gang.reservation.manifests import common, pods
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode
from airflow_provider_gang.reservation.topology import choice, kueue_assignment, ranks, room
from airflow_provider_gang.reservation.topology.pins import Placement
from airflow_provider_gang.reservation.topology.ranks import RankPlace
from airflow_provider_gang.reservation.topology.room import NodeRoom

BOUND_AND_RUNNING = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
"""The pods that take room on a node (field selectors every kube-apiserver serves for pods)."""


def _requests_only(pod: dict[str, Any]) -> dict[str, Any]:
    """What of a pod the room reads: name, namespace, gang label, node, phase, resources."""
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    kept_spec = {key: spec[key] for key in ("nodeName", "containers", "initContainers", "overhead") if key in spec}
    labels: Mapping[str, Any] = metadata["labels"] if isinstance(metadata.get("labels"), Mapping) else {}
    return {
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "labels": {naming.GANG_LABEL: labels[naming.GANG_LABEL]} if naming.GANG_LABEL in labels else {},
        },
        "spec": kept_spec,
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def _unpinned_member(spec: GangSpec) -> dict[str, Any]:
    """The member pod's spec without the try's own topology pins: where a member may run at all."""
    template: dict[str, Any] = pods.member_template(dataclasses.replace(spec, placement=None))
    return dict(template["spec"])


def member_needs(spec: GangSpec) -> dict[str, Any]:
    """What one member of ``spec`` requests (``reservation.topology.room.member_requests``)."""
    return room.member_requests(_unpinned_member(spec))


async def read_rooms(client: KubeClient, spec: GangSpec) -> tuple[NodeRoom, ...]:
    """The room on every node a member of ``spec`` may run on; the gang's own pods take none."""
    nodes, _ = await client.list(NODES)
    bound, _ = await client.list(PODS_OF_EVERY_NAMESPACE, field_selector=BOUND_AND_RUNNING, transform=_requests_only)
    own = frozenset(
        f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        for pod in bound
        if pod["metadata"]["labels"].get(naming.GANG_LABEL) == spec.name
    )
    return room.rooms(nodes, bound, _unpinned_member(spec), leave_out=own)


def _label(spec: GangSpec) -> str:
    label = spec.topology_label
    if label is None:
        raise ValueError(f"gang {spec.name} has no topology")
    return label


async def choose_placement(client: KubeClient, spec: GangSpec) -> Placement | None:
    """The domains ``spec``'s members are pinned to (``reservation.topology.choice``)."""
    rooms = await read_rooms(client, spec)
    required = spec.required_topology is not None
    return choice.choose(rooms, label=_label(spec), required=required, size=spec.size, member=member_needs(spec))


async def placed(client: KubeClient, spec: GangSpec) -> tuple[GangSpec, str | None]:
    """``spec`` as this try creates it, and what the room said (``None``: no topology). A ``gates`` or
    ``provisioning_request`` gang not placed yet gets its :class:`Placement` (chosen now, or left
    without a pin when a preferred topology is on no node); an adopted one keeps its own; a ``kueue``
    or ``workload`` gang is placed by Kueue or the scheduler, and only the room's note is read."""
    label = spec.topology_label
    if label is None:
        return spec, None
    if spec.placement is not None:
        return spec, spec.placement.note
    if not spec.mode.uses_provisioning_request:
        return spec, await room_note(client, spec)
    placement = await choose_placement(client, spec)
    if placement is None:
        return spec, f"no node a member may run on carries {label}: the members are placed without a pin"
    return dataclasses.replace(spec, placement=placement), placement.note


async def room_note(client: KubeClient, spec: GangSpec) -> str:
    """What the room says of ``spec`` now, as a line (``"rack-b1 holds the 4 members (room: ...)"``)."""
    try:
        placement = await choose_placement(client, spec)
    except PlacementRefused as refused:
        return refused.message
    if placement is None:
        return f"no node a member may run on carries {_label(spec)}"
    return placement.note


async def place_ranks(client: KubeClient, spec: GangSpec) -> tuple[RankPlace, ...]:
    """Every rank of ``spec`` over its pinned domains, with the room read now."""
    if spec.placement is None:
        raise ValueError(f"gang {spec.name} has no placement")
    rooms = await read_rooms(client, spec)
    return ranks.place_ranks(rooms, spec.placement, size=spec.size, member=member_needs(spec))


async def rank_domains(client: KubeClient, label: str, members: Iterable[tuple[int, str | None]]) -> dict[int, str]:
    """``rank -> domain of label`` for the members' nodes (``(rank, node name)``)."""
    nodes, _ = await client.list(NODES)
    return ranks.rank_domains(members, nodes, label)


@dataclass(frozen=True)
class LaunchPlaces:
    """Where the ranks go at launch: ``hosts`` (per rank, the ``kubernetes.io/hostname`` to pin; only
    for a gang the provider places) and ``domains`` (rank -> domain, for the world ConfigMap); ``None``
    where unknown."""

    hosts: tuple[str | None, ...] | None = None
    domains: dict[int, str] | None = None


async def places_at_launch(client: KubeClient, spec: GangSpec, *, job_uid: str | None) -> LaunchPlaces:
    """Where ``spec``'s ranks go, read when its reservation is granted (module docstring); raises
    ``PlacementRefused`` when its pinned domains no longer hold it (``topology_domain_full``)."""
    label = spec.topology_label
    if label is None:
        return LaunchPlaces()
    if spec.placement is not None:
        try:
            placed = await place_ranks(client, spec)
        except PlacementRefused:
            if not spec.placement.grows:
                raise
            # The autoscaler marks a request provisioned when it issues the scale-up; the nodes come
            # after. The members wait for them pinned to the domain, not to hosts.
            return LaunchPlaces(domains=dict.fromkeys(range(spec.size), spec.placement.domains[0]))
        return LaunchPlaces(tuple(place.host for place in placed), {place.rank: place.domain for place in placed})
    if spec.mode is ReservationMode.WORKLOAD:
        return LaunchPlaces(domains=await _bound_domains(client, spec, label))
    if spec.mode is ReservationMode.KUEUE:
        return LaunchPlaces(domains=await _assigned_domains(client, spec, label, job_uid) or None)
    return LaunchPlaces()


async def _bound_domains(client: KubeClient, spec: GangSpec, label: str) -> dict[int, str]:
    """The domains of the nodes ``spec``'s members are bound to (a ``workload`` gang, once bound)."""
    bound, _ = await client.list(PODS, spec.namespace, label_selector=common.member_selector(spec))
    placed = [(members.member_rank(pod), (pod.get("spec") or {}).get("nodeName")) for pod in bound]
    return await rank_domains(client, label, [(rank, node) for rank, node in placed if rank is not None])


async def _assigned_domains(client: KubeClient, spec: GangSpec, label: str, job_uid: str | None) -> dict[int, str]:
    """The domains Kueue's topology assignment gives ``spec``'s ranks (its newest Workload)."""
    selector = inspection.watch_targets(spec, job_uid).workload_selector or ""
    workloads, _ = await client.list(WORKLOADS, spec.namespace, label_selector=selector)
    latest = max(workloads, key=lambda item: str(item["metadata"].get("creationTimestamp", "")), default={})
    nodes, _ = await client.list(NODES)
    try:
        return kueue_assignment.rank_domains(latest, label, nodes)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        raise MalformedObject(
            f"Workload of gang {spec.name}: its topologyAssignment cannot be read ({error!r})"
        ) from None

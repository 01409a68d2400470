"""Creating a gang's objects: the owner first, then the reservation, then the members all at once.

``workload`` mode: the PodGroup right after the owner, then every member linked to it (the
kube-scheduler holds them until all exist, then binds them in one cycle or none).

Manifests come from ``reservation.manifests``; this module only sends them. Every create is
"create or adopt": names are deterministic per try, so ``AlreadyExists`` means an earlier worker of
this try created the object, and it is reused. Members are created (and gates released)
concurrently, by ``ClientOptions.max_parallel_requests`` workers under the client's rate limit, so
they are all bound well inside the 10-minute booking window of a provisioned request
(``BookingExpired`` after 10 minutes, cluster-autoscaler ``proposals/provisioning-request.md``); the
first create failing past its retries stops further creates (:mod:`.parallel`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_gang.hooks import gate_release, parallel
from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import (
    CONFIG_MAPS,
    JOBS,
    POD_GROUPS,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
    SERVICES,
    Resource,
)
from airflow_provider_gang.reservation import manifests
from airflow_provider_gang.reservation.records.tries import ReservationFacts, ReservedObject
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode


async def create_or_adopt(
    client: KubeClient, kind: Resource, body: Mapping[str, Any], namespace: str
) -> tuple[dict[str, Any], bool]:
    """Create ``body``; if it already exists and belongs to the same owner, return the existing object.
    Second item: created now.

    An existing object whose ``ownerReferences`` do not name ``body``'s owner is what an earlier
    owner of the same name left for the garbage collector (a gang deleted and made anew in between):
    it is deleted - only that object, by uid precondition - and ``body`` created in its place.
    """
    try:
        return await client.create(kind, body, namespace), True
    except errors.AlreadyExists:
        existing = await client.get(kind, str(body["metadata"]["name"]), namespace)
    wanted = {reference.get("uid") for reference in body["metadata"].get("ownerReferences") or []}
    found = {reference.get("uid") for reference in existing["metadata"].get("ownerReferences") or []}
    if not wanted or wanted & found:
        return existing, False
    # A Conflict: another copy of this try replaced it already; the create below adopts that one.
    with contextlib.suppress(errors.Conflict):
        await client.delete(
            kind, str(existing["metadata"]["name"]), namespace, preconditions={"uid": str(existing["metadata"]["uid"])}
        )
    return await create_or_adopt(client, kind, body, namespace)


async def claim_owner(client: KubeClient, spec: GangSpec, owner_try: int) -> tuple[dict[str, Any], bool]:
    """Create the owner ConfigMap marked as owned by try ``owner_try``, or adopt the existing one and
    mark it so; second item: created now.

    This is the first write of every try, before anything else of the gang is created or adopted: the
    mark changes the ConfigMap's ``resourceVersion``, so an older try's trigger whose ``on_kill`` read it
    before cannot delete it any more (its delete carries that ``resourceVersion`` as a precondition,
    ``triggers.kill``). If the ConfigMap disappears between the create and the mark (an older try's
    ``on_kill`` won that race), it is created anew once; deleted a second time, the ``NotFound`` is raised.
    """
    body = manifests.owner.owner_config_map(spec, owner_try=owner_try)
    try:
        return await _create_or_mark(client, body, owner_try, spec.namespace)
    except errors.NotFound:
        return await _create_or_mark(client, body, owner_try, spec.namespace)


async def _create_or_mark(
    client: KubeClient, body: Mapping[str, Any], owner_try: int, namespace: str
) -> tuple[dict[str, Any], bool]:
    try:
        return await client.create(CONFIG_MAPS, body, namespace), True
    except errors.AlreadyExists:
        mark = {"metadata": {"annotations": manifests.owner.owner_try_annotations(owner_try)}}
        return await client.patch(CONFIG_MAPS, str(body["metadata"]["name"]), mark, namespace=namespace), False


Made = list[tuple[Resource, tuple[dict[str, Any], bool]]]
"""What a stage adopted or created: (kind, (object, created now)), in creation order."""


async def ensure_reservation(
    client: KubeClient, spec: GangSpec, *, owner_try: int, multikueue: bool = False
) -> ReservationFacts:
    """Adopt or create the gang's owner and reservation objects as try ``owner_try``; what the later
    stages need of them. ``multikueue``: ``spec``'s queue is on a Kueue MultiKueue manager, whose Job
    runs on a worker cluster (``reservation.multikueue``): the Job is created for MultiKueue, and no
    rendezvous Service is created here, where no member runs (``hooks.multikueue.prepare_worker``
    makes it on the worker)."""
    owner, owner_created = await claim_owner(client, spec, owner_try)
    owner_uid = str(owner["metadata"]["uid"])
    made: Made = [(CONFIG_MAPS, (owner, owner_created))]
    if spec.distributed is not None and not multikueue:
        service = manifests.service.headless_service(spec, owner_uid=owner_uid)
        made.append((SERVICES, await create_or_adopt(client, SERVICES, service, spec.namespace)))
    made += await _reserve(client, spec, owner_uid=owner_uid, multikueue=multikueue)
    return _facts(made, owner_uid)


async def _reserve(client: KubeClient, spec: GangSpec, *, owner_uid: str, multikueue: bool) -> Made:
    """The reservation objects of ``spec.mode``, in order: the Job (``kueue``); the PodGroup and its
    members (``workload``); the PodTemplate, the ProvisioningRequest and, for ``gates``, the gated members."""
    namespace = spec.namespace
    if spec.mode is ReservationMode.KUEUE:
        job = manifests.kueue.job(spec, owner_uid=owner_uid, multikueue=multikueue)
        return [(JOBS, await create_or_adopt(client, JOBS, job, namespace))]
    if spec.mode is ReservationMode.WORKLOAD:
        group = manifests.pod_group.pod_group(spec, owner_uid=owner_uid)
        made: Made = [(POD_GROUPS, await create_or_adopt(client, POD_GROUPS, group, namespace))]
        linked = [manifests.pod_group.member_pod(spec, rank, owner_uid=owner_uid) for rank in range(spec.size)]
        return made + [(PODS, result) for result in await create_members(client, linked, namespace)]
    template = manifests.provisioning.pod_template(spec, owner_uid=owner_uid)
    made = [(POD_TEMPLATES, await create_or_adopt(client, POD_TEMPLATES, template, namespace))]
    request = manifests.provisioning.provisioning_request(spec, owner_uid=owner_uid)
    made.append((PROVISIONING_REQUESTS, await create_or_adopt(client, PROVISIONING_REQUESTS, request, namespace)))
    if spec.mode is ReservationMode.GATES:
        gated = [manifests.pods.gated_pod(spec, rank, owner_uid=owner_uid) for rank in range(spec.size)]
        made += [(PODS, result) for result in await create_members(client, gated, namespace)]
    return made


def _facts(made: Made, owner_uid: str) -> ReservationFacts:
    """What the later stages need of the objects ``made``."""
    return ReservationFacts(
        created=sum(was_created for _, (_, was_created) in made),
        owner_uid=owner_uid,
        job_uid=next((str(obj["metadata"]["uid"]) for kind, (obj, _) in made if kind is JOBS), None),
        objects=tuple(
            ReservedObject(kind.key, str(obj["metadata"]["name"]), str(obj["metadata"]["uid"]))
            for kind, (obj, _) in made
        ),
    )


async def launch(
    client: KubeClient, spec: GangSpec, *, size: int, owner_uid: str, hosts: Sequence[str | None] | None = None
) -> str:
    """Start the members, all at once: create them (``provisioning_request``), release every gate
    together (``gates``), or nothing (``kueue``: admission unsuspends the Job, its controller creates
    them; ``workload``: the scheduler bound the members created with their PodGroup);
    ``client.max_parallel_requests`` calls at a time, stopping at the first failing past its retries
    (raised). ``hosts``: per rank, the ``kubernetes.io/hostname`` a topology gang's member is pinned
    to as it is created or released (``reservation.topology.ranks``). Returns what was done, for the log."""
    namespace = spec.namespace
    host_of = (lambda rank: hosts[rank]) if hosts is not None else (lambda rank: None)
    if spec.mode is ReservationMode.KUEUE:
        return "Kueue admitted the Job; its controller creates the members"
    if spec.mode is ReservationMode.WORKLOAD:
        return f"the kube-scheduler bound the {size} members of PodGroup {spec.name} together"
    if spec.mode is ReservationMode.GATES:
        released = await gate_release.release_gates(client, spec, host_of=host_of)
        return f"released the scheduling gate of {released} members together{_at_a_time(client)}"
    results = await create_members(
        client,
        [manifests.pods.launch_pod(spec, rank, owner_uid=owner_uid, host=host_of(rank)) for rank in range(size)],
        namespace,
    )
    created = sum(was_created for _, was_created in results)
    return f"created {created} member pods{_at_a_time(client)}, adopted {size - created}"


async def create_members(
    client: KubeClient, bodies: Sequence[Mapping[str, Any]], namespace: str
) -> list[tuple[dict[str, Any], bool]]:
    """Create or adopt every member pod of ``bodies``, ``client.max_parallel_requests`` at a time
    (``parallel.bounded_gather``: the first create failing past its retries stops the others from
    starting, and is raised). Each result as ``create_or_adopt``'s."""
    creates = [functools.partial(create_or_adopt, client, PODS, body, namespace) for body in bodies]
    return await parallel.bounded_gather(creates, limit=client.max_parallel_requests)


def _at_a_time(client: KubeClient) -> str:
    limit = client.max_parallel_requests
    return f", {limit} at a time" if limit else ""


async def publish_world(
    client: KubeClient, spec: GangSpec, *, size: int, owner_uid: str, domains: Mapping[int, str] | None = None
) -> str | None:
    """Tell the members how many they are and where each rank runs: create (or adopt) the world
    ConfigMap with ``size``, the admitted count of a partially admitted Kueue gang, and the ranks'
    ``domains`` of a gang with a topology (``reservation.manifests.world``); one that exists with
    other data (an earlier worker of this try saw another admission or placement) is patched.
    ``None`` when there is nothing to tell; else what was done, for the log. Called first when the
    reservation is granted: until then no member of a partially admitted gang can start."""
    domains = domains if spec.topology_label is not None else None
    if not manifests.world.uses_world_config_map(spec) and domains is None:
        return None
    body = manifests.world.world_config_map(spec, size=size, owner_uid=owner_uid, domains=domains)
    name = str(body["metadata"]["name"])
    existing, created = await create_or_adopt(client, CONFIG_MAPS, body, spec.namespace)
    told = f"{size} of {spec.size}" if manifests.world.uses_world_config_map(spec) else f"the domains of {size} ranks"
    if created or existing.get("data") == body["data"]:
        return f"ConfigMap {name} tells the members {told} ({'created' if created else 'adopted'})"
    await client.patch(CONFIG_MAPS, name, {"data": body["data"]}, namespace=spec.namespace)
    return f"ConfigMap {name} tells the members {told} (corrected from {existing.get('data')})"

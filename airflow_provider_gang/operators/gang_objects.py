"""The operator's cluster work for one gang: precheck, withdraw, adopt-or-create, launch, teardown, logs.

Manifests come from ``reservation.manifests``; this module only sends them. Every create is
"create or adopt": names are deterministic per try, so ``AlreadyExists`` means an earlier worker of
this try created the object, and it is reused. Every delete is idempotent (``NotFound`` is done).
Prechecks are :mod:`.precheck`. Members are created (and gates released) concurrently, by
``ClientOptions.max_parallel_requests`` workers under the client's rate limit, so they are all bound
well inside the 10-minute booking window of a provisioned request (``BookingExpired`` after 10
minutes, cluster-autoscaler ``proposals/provisioning-request.md``); the first create failing past
its retries stops further creates (:mod:`.parallel`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import (
    CONFIG_MAPS,
    JOBS,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
    SERVICES,
    Resource,
)
from airflow_provider_gang.operators import gate_release, parallel
from airflow_provider_gang.reservation import decision, manifests, members, naming, shape
from airflow_provider_gang.reservation.decision import Decision, Observed, Policy, Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

LOG_TAIL_LINES = 2000
LOG_READ_TIMEOUT = 30.0
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
_COMMON_KINDS = (PODS, SERVICES, CONFIG_MAPS)


def gang_kinds(mode: ReservationMode) -> tuple[Resource, ...]:
    """The kinds a gang of ``mode`` creates: what teardown, withdrawal and ``on_kill`` look for."""
    own = (JOBS,) if mode is ReservationMode.KUEUE else (PROVISIONING_REQUESTS, POD_TEMPLATES)
    return (*own, *_COMMON_KINDS)


@dataclass(frozen=True)
class Watch:
    """What the triggers watch for ``spec`` (see ``triggers.observation.GangObjects``)."""

    provisioning_request: str | None
    workload_selector: str | None
    gated_pod_selector: str | None
    scheduling_gate: str | None
    member_selector: str


async def _create_or_adopt(
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
    return await _create_or_adopt(client, kind, body, namespace)


async def adoption_refusal(client: KubeClient, spec: GangSpec, *, attempt: int, owner_uid: str | None) -> str | None:
    """Why the gang of try ``attempt`` (``spec``, whose owner ConfigMap had ``owner_uid`` if known)
    must not be adopted, or ``None`` when it is intact: its owner exists, is not being deleted, is
    the same object (uid) and is still marked as owned by that try."""
    name = naming.GangNames(spec.name).owner
    try:
        owner = await client.get(CONFIG_MAPS, name, spec.namespace)
    except errors.NotFound:
        return f"its owner ConfigMap {name} is gone (deleted by a kill or by hand)"
    metadata = owner["metadata"]
    if metadata.get("deletionTimestamp"):
        return f"its owner ConfigMap {name} is being deleted"
    if owner_uid is not None and metadata.get("uid") != owner_uid:
        return f"its owner ConfigMap {name} was replaced (uid {metadata.get('uid')}, recorded {owner_uid})"
    marked = manifests.owner.recorded_owner_try(owner)
    if marked is not None and marked != attempt:
        return f"its owner ConfigMap {name} is marked as owned by try {marked}"
    return None


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


async def ensure_reservation(client: KubeClient, spec: GangSpec, *, owner_try: int) -> dict[str, Any]:
    """Adopt or create the gang's owner and reservation objects as try ``owner_try``; facts the later
    stages need.

    Returns ``{"created": <objects created now>, "owner_uid": ..., "job_uid": <Kueue Job uid or None>,
    "objects": [(resource key, name, uid), ...]}``.
    """
    namespace = spec.namespace
    owner, owner_created = await claim_owner(client, spec, owner_try)
    owner_uid = str(owner["metadata"]["uid"])
    made: list[tuple[Resource, tuple[dict[str, Any], bool]]] = [(CONFIG_MAPS, (owner, owner_created))]
    if spec.distributed is not None:
        made.append(
            (
                SERVICES,
                await _create_or_adopt(
                    client, SERVICES, manifests.service.headless_service(spec, owner_uid=owner_uid), namespace
                ),
            )
        )
    if spec.mode is ReservationMode.KUEUE:
        made.append(
            (JOBS, await _create_or_adopt(client, JOBS, manifests.kueue.job(spec, owner_uid=owner_uid), namespace))
        )
    else:
        made.append(
            (
                POD_TEMPLATES,
                await _create_or_adopt(
                    client, POD_TEMPLATES, manifests.provisioning.pod_template(spec, owner_uid=owner_uid), namespace
                ),
            )
        )
        made.append(
            (
                PROVISIONING_REQUESTS,
                await _create_or_adopt(
                    client,
                    PROVISIONING_REQUESTS,
                    manifests.provisioning.provisioning_request(spec, owner_uid=owner_uid),
                    namespace,
                ),
            )
        )
    if spec.mode is ReservationMode.GATES:
        gated = await create_members(
            client, [manifests.pods.gated_pod(spec, rank, owner_uid=owner_uid) for rank in range(spec.size)], namespace
        )
        made += [(PODS, result) for result in gated]
    job_uid = next((str(obj["metadata"]["uid"]) for kind, (obj, _) in made if kind is JOBS), None)
    return {
        "created": sum(was_created for _, (_, was_created) in made),
        "owner_uid": owner_uid,
        "job_uid": job_uid,
        "objects": [(kind.key, str(obj["metadata"]["name"]), str(obj["metadata"]["uid"])) for kind, (obj, _) in made],
    }


def watch_targets(spec: GangSpec, job_uid: str | None = None) -> Watch:
    """Names and selectors of what the triggers watch for ``spec``."""
    names = naming.GangNames(spec.name)
    uses_request = spec.mode is not ReservationMode.KUEUE
    return Watch(
        provisioning_request=names.provisioning_request if uses_request else None,
        workload_selector=f"{KUEUE_JOB_UID_LABEL}={job_uid}" if job_uid else None,
        gated_pod_selector=manifests.common.member_selector(spec) if spec.mode is ReservationMode.GATES else None,
        scheduling_gate=names.scheduling_gate if spec.mode is ReservationMode.GATES else None,
        member_selector=manifests.common.member_selector(spec),
    )


async def recheck_reservation(client: KubeClient, spec: GangSpec, *, started_at: float, now: float) -> Decision | None:
    """The reservation decision just before launching, for the modes with a ProvisioningRequest.

    A deferred task resumes on a worker some time after its trigger fired; if that took longer than
    the 10-minute booking (or the capacity was revoked meanwhile), members created now would not
    consume anything. ``None`` for ``kueue`` (Kueue itself starts the admitted Job).
    """
    if spec.mode is ReservationMode.KUEUE:
        return None
    names = naming.GangNames(spec.name)
    try:
        request: dict[str, Any] | None = await client.get(
            PROVISIONING_REQUESTS, names.provisioning_request, spec.namespace
        )
    except errors.NotFound:
        request = None
    pods: list[dict[str, Any]] = []
    if spec.mode is ReservationMode.GATES:
        pods, _ = await client.list(PODS, spec.namespace, label_selector=manifests.common.member_selector(spec))
    observed = Observed(
        mode=spec.mode,
        stage=Stage.RESERVATION,
        size=spec.size,
        started_at=started_at,
        provisioning_request=request,
        pods=tuple(pods),
        scheduling_gate=names.scheduling_gate if spec.mode is ReservationMode.GATES else None,
    )
    problem = shape.malformed_in(observed)
    if problem is not None:
        return Decision(
            phase=Phase.FAILED,
            terminal=True,
            reason=Reason.MALFORMED_ANSWER,
            message=f"the API server sent an object this provider cannot read: {problem}",
        )
    return decision.decide(observed, now=now, policy=Policy())


async def launch(client: KubeClient, spec: GangSpec, *, size: int, owner_uid: str) -> str:
    """Start the members, all at once: create them (``provisioning_request``), release every gate
    together (``gates``), or nothing (``kueue``: admission unsuspends the Job, its controller creates
    them); ``client.max_parallel_requests`` calls at a time, stopping at the first failing past its
    retries (raised). Returns what was done, for the log."""
    namespace = spec.namespace
    if spec.mode is ReservationMode.KUEUE:
        return "Kueue admitted the Job; its controller creates the members"
    if spec.mode is ReservationMode.GATES:
        released = await gate_release.release_gates(client, spec)
        return f"released the scheduling gate of {released} members together{_at_a_time(client)}"
    results = await create_members(
        client, [manifests.pods.launch_pod(spec, rank, owner_uid=owner_uid) for rank in range(size)], namespace
    )
    created = sum(was_created for _, was_created in results)
    return f"created {created} member pods{_at_a_time(client)}, adopted {size - created}"


async def create_members(
    client: KubeClient, bodies: Sequence[Mapping[str, Any]], namespace: str
) -> list[tuple[dict[str, Any], bool]]:
    """Create or adopt every member pod of ``bodies``, ``client.max_parallel_requests`` at a time
    (``parallel.bounded_gather``: the first create failing past its retries stops the others from
    starting, and is raised). Each result as ``_create_or_adopt``'s."""
    creates = [functools.partial(_create_or_adopt, client, PODS, body, namespace) for body in bodies]
    return await parallel.bounded_gather(creates, limit=client.max_parallel_requests)


def _at_a_time(client: KubeClient) -> str:
    limit = client.max_parallel_requests
    return f", {limit} at a time" if limit else ""


async def publish_world(client: KubeClient, spec: GangSpec, *, size: int, owner_uid: str) -> str | None:
    """Tell the members of a partially admitted Kueue gang how many they are: create (or adopt) the
    world ConfigMap with ``size``, the admitted count (``reservation.manifests.world``); one that
    exists with another count (an earlier worker of this try saw another admission) is patched to
    ``size``. ``None`` when ``spec``'s members read no world ConfigMap; else what was done, for the
    log. Called first when the reservation is granted: until then no member container can start."""
    if not manifests.world.uses_world_config_map(spec):
        return None
    body = manifests.world.world_config_map(spec, size=size, owner_uid=owner_uid)
    name = str(body["metadata"]["name"])
    existing, created = await _create_or_adopt(client, CONFIG_MAPS, body, spec.namespace)
    told = manifests.world.recorded_size(existing)
    if created or told == size:
        return f"ConfigMap {name} tells the members {size} of {spec.size} ({'created' if created else 'adopted'})"
    await client.patch(CONFIG_MAPS, name, {"data": body["data"]}, namespace=spec.namespace)
    return f"ConfigMap {name} tells the members {size} of {spec.size} (corrected from {told})"


TEARDOWN_PASSES = 3
"""Deleting is idempotent, so a teardown whose calls failed past the client's retries lists and
deletes again, up to this many passes, before it gives up (the next try withdraws what is left)."""


async def _delete_pass(
    client: KubeClient, namespace: str, selector: str, kinds: tuple[Resource, ...]
) -> tuple[int, errors.KubeError | None]:
    """One LIST + DELETE of every kind; the number deleted and the first error, if any."""

    async def one_kind(kind: Resource) -> int:
        try:
            items, _ = await client.list(kind, namespace, label_selector=selector)
        except errors.NotFound:
            return 0  # kind not served (e.g. no ProvisioningRequest CRD in a Kueue-only cluster)
        deleted = await asyncio.gather(
            *(client.delete(kind, str(item["metadata"]["name"]), namespace) for item in items), return_exceptions=True
        )
        failure = next((result for result in deleted if isinstance(result, BaseException)), None)
        if failure is not None:
            raise failure
        return sum(bool(result) for result in deleted)

    counts = await asyncio.gather(*(one_kind(kind) for kind in kinds), return_exceptions=True)
    unexpected = next(
        (count for count in counts if isinstance(count, BaseException) and not isinstance(count, errors.KubeError)),
        None,
    )
    if unexpected is not None:
        raise unexpected
    first_error = next((count for count in counts if isinstance(count, errors.KubeError)), None)
    return sum(count for count in counts if isinstance(count, int)), first_error


async def _delete_labelled(client: KubeClient, namespace: str, gang: str, kinds: tuple[Resource, ...]) -> int:
    selector = f"{naming.GANG_LABEL}={gang}"
    deleted = 0
    for attempt in range(1, TEARDOWN_PASSES + 1):
        count, error = await _delete_pass(client, namespace, selector, kinds)
        deleted += count
        if error is None:
            return deleted
        if not error.retryable or attempt == TEARDOWN_PASSES:
            raise error
        await asyncio.sleep(client.retry.delay(attempt))
    return deleted


async def teardown(client: KubeClient, spec: GangSpec, *, keep_members: bool = False) -> int:
    """Delete every object of the gang; returns how many were deleted (see :data:`TEARDOWN_PASSES`).

    ``keep_members`` (``on_finish="keep"`` after a success) deletes only what holds or describes the
    reservation - ProvisioningRequest, PodTemplate, Service - and keeps the finished member pods with
    what owns them (the owner ConfigMap; in ``kueue`` mode the finished Job, whose Workload holds no
    quota any more), so deleting the owner ConfigMap later removes the rest.
    """
    kinds = gang_kinds(spec.mode)
    if keep_members:
        kinds = tuple(kind for kind in kinds if kind not in (PODS, CONFIG_MAPS, JOBS))
    return await _delete_labelled(client, spec.namespace, spec.name, kinds)


async def withdraw(client: KubeClient, namespace: str, gangs: Iterable[str], mode: ReservationMode) -> int:
    """Delete what earlier tries of a ``mode`` task left (their reservation requests, gated or stray pods)."""
    counts: list[Awaitable[int]] = [
        _delete_labelled(client, namespace, gang, gang_kinds(mode)) for gang in dict.fromkeys(gangs)
    ]
    return sum(await asyncio.gather(*counts))


def kill_targets(spec: GangSpec) -> list[dict[str, Any]]:
    """``delete_on_kill`` for the triggers: every kind the gang may have, by the gang's label."""
    selector = manifests.common.gang_selector(spec)
    return [{"resource": kind.key, "name": None, "label_selector": selector} for kind in gang_kinds(spec.mode)]


async def read_logs(client: KubeClient, spec: GangSpec, ranks: Iterable[int]) -> dict[int, str]:
    """The last ``LOG_TAIL_LINES`` lines of each wanted rank's first container (missing ranks skipped)."""
    wanted = set(ranks)
    pods, _ = await client.list(PODS, spec.namespace, label_selector=manifests.common.member_selector(spec))
    by_rank = {members.member_rank(pod): str(pod["metadata"]["name"]) for pod in pods}

    async def one(rank: int, name: str) -> tuple[int, str]:
        path = PODS.path(spec.namespace, name, "log")
        try:
            async with client.open_stream(
                path, {"tailLines": str(LOG_TAIL_LINES)}, read_timeout=LOG_READ_TIMEOUT
            ) as stream:
                raw = await asyncio.wait_for(stream.read(), timeout=LOG_READ_TIMEOUT)
        except (errors.KubeError, TimeoutError) as error:
            return rank, f"(log unavailable: {error})"
        return rank, raw.decode("utf-8", errors="replace")

    found = [(rank, name) for rank, name in by_rank.items() if rank is not None and rank in wanted]
    return dict(await asyncio.gather(*(one(rank, name) for rank, name in found)))

"""The operator's cluster work for one gang: precheck, withdraw, adopt-or-create, launch, teardown, logs.

Manifests come from ``reservation.manifests``; this module only sends them. Every create is
"create or adopt": names are deterministic per try, so ``AlreadyExists`` means an earlier worker of
this try created the object, and it is reused. Every delete is idempotent (``NotFound`` is done).
Members are created concurrently so they are all bound well inside the 10-minute booking window of
a provisioned request (gang-reservation-apis section 1.6).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.kube import discovery, errors
from airflow_provider_gang.kube.client import KubeClient, PatchType
from airflow_provider_gang.kube.resources import (
    CONFIG_MAPS,
    JOBS,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
    SERVICES,
    WORKLOADS,
    Resource,
)
from airflow_provider_gang.reservation import decision, manifests, members, naming
from airflow_provider_gang.reservation.decision import Decision, Observed, Policy, Stage
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

LOG_TAIL_LINES = 2000
LOG_READ_TIMEOUT = 30.0
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
_TEARDOWN_KINDS = (PODS, JOBS, PROVISIONING_REQUESTS, POD_TEMPLATES, SERVICES, CONFIG_MAPS)


class PrecheckFailed(Exception):
    """The cluster cannot run this gang: an API kind is not served or a permission is missing."""


@dataclass(frozen=True)
class Watch:
    """What the triggers watch for ``spec`` (see ``triggers.observation.GangObjects``)."""

    provisioning_request: str | None
    workload_selector: str | None
    gated_pod_selector: str | None
    scheduling_gate: str | None
    member_selector: str


def _kinds_needed(spec: GangSpec) -> list[Resource]:
    kinds = [CONFIG_MAPS, PODS, SERVICES]
    if spec.mode is ReservationMode.KUEUE:
        kinds += [JOBS, WORKLOADS]
    else:
        kinds += [POD_TEMPLATES, PROVISIONING_REQUESTS]
    return kinds


def _permissions_needed(spec: GangSpec) -> list[tuple[str, Resource, str]]:
    wanted = [(verb, kind, "") for kind in _kinds_needed(spec) if kind is not WORKLOADS
              for verb in ("create", "delete", "list")]
    wanted += [("watch", PODS, ""), ("get", PODS, "log")]
    if spec.mode is ReservationMode.GATES:
        wanted.append(("patch", PODS, ""))
    if spec.mode is ReservationMode.KUEUE:
        wanted += [("list", WORKLOADS, ""), ("watch", WORKLOADS, "")]
    else:
        wanted.append(("watch", PROVISIONING_REQUESTS, ""))
    return wanted


async def precheck(client: KubeClient, spec: GangSpec) -> None:
    """Fail fast, naming what is missing, before anything is created (issue 5, behaviour 2)."""
    missing_kinds = []
    for kind in _kinds_needed(spec):
        if not await discovery.is_served(client, kind):
            missing_kinds.append(f"{kind.plural}.{kind.group or 'core'}/{kind.version}")
    if missing_kinds:
        raise PrecheckFailed(
            f"the cluster does not serve {', '.join(missing_kinds)}, needed by reservation={spec.mode.value!r}; "
            "install the CRD / controller (cluster-autoscaler ProvisioningRequest v1, or Kueue) or change the mode"
        )
    wanted = _permissions_needed(spec)
    answers = await asyncio.gather(*(
        discovery.can_i(client, verb, kind, spec.namespace, subresource=sub) for verb, kind, sub in wanted
    ))
    denied = [
        f"{verb} {kind.plural}{'/' + sub if sub else ''}" + (f".{kind.group}" if kind.group else "")
        for (verb, kind, sub), answer in zip(wanted, answers, strict=True) if not answer.allowed
    ]
    if denied:
        raise PrecheckFailed(
            f"missing permission in namespace {spec.namespace!r}: {', '.join(denied)}; "
            "grant them to the connection's identity (Role + RoleBinding)"
        )


async def _create_or_adopt(client: KubeClient, kind: Resource, body: Mapping[str, Any], namespace: str) -> tuple[
        dict[str, Any], bool]:
    """Create ``body``; if it already exists, return the existing object. Second item: created now."""
    try:
        return await client.create(kind, body, namespace), True
    except errors.AlreadyExists:
        return await client.get(kind, str(body["metadata"]["name"]), namespace), False


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


async def _create_or_mark(client: KubeClient, body: Mapping[str, Any], owner_try: int, namespace: str) -> tuple[
        dict[str, Any], bool]:
    try:
        return await client.create(CONFIG_MAPS, body, namespace), True
    except errors.AlreadyExists:
        mark = {"metadata": {"annotations": manifests.owner.owner_try_annotations(owner_try)}}
        return await client.patch(CONFIG_MAPS, str(body["metadata"]["name"]), mark, namespace=namespace), False


async def ensure_reservation(client: KubeClient, spec: GangSpec, *, owner_try: int) -> dict[str, Any]:
    """Adopt or create the gang's owner and reservation objects as try ``owner_try``; facts the later
    stages need.

    Returns ``{"created": <objects created now>, "owner_uid": ..., "job_uid": <Kueue Job uid or None>}``.
    """
    namespace = spec.namespace
    owner, owner_created = await claim_owner(client, spec, owner_try)
    owner_uid = str(owner["metadata"]["uid"])
    created = int(owner_created)
    job_uid = None
    if spec.distributed is not None:
        created += (await _create_or_adopt(client, SERVICES, manifests.service.headless_service(
            spec, owner_uid=owner_uid), namespace))[1]
    if spec.mode is ReservationMode.KUEUE:
        job, job_created = await _create_or_adopt(client, JOBS, manifests.kueue.job(spec, owner_uid=owner_uid),
                                                  namespace)
        job_uid, created = str(job["metadata"]["uid"]), created + job_created
    else:
        created += (await _create_or_adopt(client, POD_TEMPLATES, manifests.provisioning.pod_template(
            spec, owner_uid=owner_uid), namespace))[1]
        created += (await _create_or_adopt(client, PROVISIONING_REQUESTS, manifests.provisioning.provisioning_request(
            spec, owner_uid=owner_uid), namespace))[1]
    if spec.mode is ReservationMode.GATES:
        gated = await asyncio.gather(*(
            _create_or_adopt(client, PODS, manifests.pods.gated_pod(spec, rank, owner_uid=owner_uid), namespace)
            for rank in range(spec.size)
        ))
        created += sum(was_created for _, was_created in gated)
    return {"created": created, "owner_uid": owner_uid, "job_uid": job_uid}


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
        request: dict[str, Any] | None = await client.get(PROVISIONING_REQUESTS, names.provisioning_request,
                                                          spec.namespace)
    except errors.NotFound:
        request = None
    pods: list[dict[str, Any]] = []
    if spec.mode is ReservationMode.GATES:
        pods, _ = await client.list(PODS, spec.namespace, label_selector=manifests.common.member_selector(spec))
    observed = Observed(mode=spec.mode, stage=Stage.RESERVATION, size=spec.size, started_at=started_at,
                        provisioning_request=request, pods=tuple(pods),
                        scheduling_gate=names.scheduling_gate if spec.mode is ReservationMode.GATES else None)
    return decision.decide(observed, now=now, policy=Policy())


async def launch(client: KubeClient, spec: GangSpec, *, size: int, owner_uid: str) -> str:
    """Start the members, all at once: create them (``provisioning_request``), release every gate
    together (``gates``), or nothing (``kueue``: admission unsuspends the Job, its controller creates
    them). Returns what was done, for the log."""
    namespace = spec.namespace
    if spec.mode is ReservationMode.KUEUE:
        return "Kueue admitted the Job; its controller creates the members"
    if spec.mode is ReservationMode.GATES:
        gate = naming.GangNames(spec.name).scheduling_gate
        pods, _ = await client.list(PODS, namespace, label_selector=manifests.common.member_selector(spec))
        patches = [(pod, manifests.pods.release_gate_patch(pod, gate)) for pod in pods]
        await asyncio.gather(*(
            client.patch(PODS, str(pod["metadata"]["name"]), patch, patch_type=PatchType.JSON, namespace=namespace)
            for pod, patch in patches if patch
        ))
        return f"released the scheduling gate of {sum(1 for _, patch in patches if patch)} members together"
    results = await asyncio.gather(*(
        _create_or_adopt(client, PODS, manifests.pods.launch_pod(spec, rank, owner_uid=owner_uid), namespace)
        for rank in range(size)
    ))
    created = sum(was_created for _, was_created in results)
    return f"created {created} member pods concurrently, adopted {size - created}"


async def _delete_labelled(client: KubeClient, namespace: str, gang: str) -> int:
    selector = f"{naming.GANG_LABEL}={gang}"

    async def one_kind(kind: Resource) -> int:
        try:
            items, _ = await client.list(kind, namespace, label_selector=selector)
        except errors.NotFound:
            return 0  # kind not served (e.g. no ProvisioningRequest CRD in a Kueue-only cluster)
        deleted = await asyncio.gather(*(
            client.delete(kind, str(item["metadata"]["name"]), namespace) for item in items
        ))
        return sum(deleted)

    counts = await asyncio.gather(*(one_kind(kind) for kind in _TEARDOWN_KINDS))
    return sum(counts)


async def teardown(client: KubeClient, spec: GangSpec) -> int:
    """Delete every object of the gang (members first, owner last); returns how many were deleted."""
    return await _delete_labelled(client, spec.namespace, spec.name)


async def withdraw(client: KubeClient, namespace: str, gangs: Iterable[str]) -> int:
    """Delete what earlier tries left (their reservation requests, gated or stray pods)."""
    counts: list[Awaitable[int]] = [_delete_labelled(client, namespace, gang) for gang in dict.fromkeys(gangs)]
    return sum(await asyncio.gather(*counts))


def kill_targets(spec: GangSpec) -> list[dict[str, Any]]:
    """``delete_on_kill`` for the triggers: every kind the gang may have, by the gang's label."""
    selector = manifests.common.gang_selector(spec)
    kinds = [PODS, CONFIG_MAPS, SERVICES]
    kinds += [JOBS] if spec.mode is ReservationMode.KUEUE else [PROVISIONING_REQUESTS, POD_TEMPLATES]
    return [{"resource": kind.key, "name": None, "label_selector": selector} for kind in kinds]


async def read_logs(client: KubeClient, spec: GangSpec, ranks: Iterable[int]) -> dict[int, str]:
    """The last ``LOG_TAIL_LINES`` lines of each wanted rank's first container (missing ranks skipped)."""
    wanted = set(ranks)
    pods, _ = await client.list(PODS, spec.namespace, label_selector=manifests.common.member_selector(spec))
    by_rank = {members.member_rank(pod): str(pod["metadata"]["name"]) for pod in pods}

    async def one(rank: int, name: str) -> tuple[int, str]:
        path = PODS.path(spec.namespace, name, "log")
        try:
            async with client.open_stream(path, {"tailLines": str(LOG_TAIL_LINES)},
                                          read_timeout=LOG_READ_TIMEOUT) as stream:
                raw = await asyncio.wait_for(stream.read(), timeout=LOG_READ_TIMEOUT)
        except (errors.KubeError, TimeoutError) as error:
            return rank, f"(log unavailable: {error})"
        return rank, raw.decode("utf-8", errors="replace")

    found = [(rank, name) for rank, name in by_rank.items() if rank is not None and rank in wanted]
    return dict(await asyncio.gather(*(one(rank, name) for rank, name in found)))

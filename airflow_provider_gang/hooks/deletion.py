"""Deleting a gang: the one function that does it (:func:`delete_gang`), and its one error policy.

Everyone who deletes a gang's objects calls :func:`delete_gang` with the gang's
:class:`~airflow_provider_gang.reservation.records.triggers.DeleteTarget` list: the operator when a
try ends (:func:`teardown`), when a new try withdraws what earlier ones left (:func:`withdraw`) and
from a worker's ``on_kill``; a trigger's ``on_kill`` (``triggers.kill``), after its guard let it.

The error policy: deleting is idempotent, so ``NotFound`` - the object already gone, or the kind not
served (no ProvisioningRequest CRD in a Kueue-only cluster) - counts as done. Every target is listed
and deleted concurrently, one pass at a time; an API error that survived the client's own retries
and is retryable (429, 5xx, transport) starts another pass after the client's backoff, up to
:data:`DELETE_PASSES`; a non-retryable one (403...) or the last pass's is raised. The caller decides
what a failed deletion means: a try ends all the same (the next try withdraws what is left), a
trigger's ``on_kill`` logs it.

The owner ConfigMap's compare-and-delete (``triggers.kill`` rule 3) is :func:`delete_owner_if_unchanged`:
deleting the owner lets the garbage collector remove every object it owns, so that delete carries
preconditions and the rest follows only if it went through. :func:`withdraw_unless_claimed` applies
it from outside a task (the listener and the sweep, ``airflow_provider_gang.sweep``): a gang whose
owner a newer try has marked is kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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
    by_key,
)
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import owner as manifests_owner
from airflow_provider_gang.reservation.records.triggers import DeleteTarget
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

DELETE_PASSES = 3
"""Passes of :func:`delete_gang` before a retryable error is raised (each call also has the
client's own retries)."""
_COMMON_KINDS = (PODS, SERVICES, CONFIG_MAPS)
ANY_MODE_KINDS = (JOBS, PROVISIONING_REQUESTS, POD_TEMPLATES, POD_GROUPS, *_COMMON_KINDS)
"""Every kind a gang of any mode creates: for a gang whose mode is not known (its owner is gone)."""


def gang_kinds(mode: ReservationMode) -> tuple[Resource, ...]:
    """The kinds a gang of ``mode`` creates: what teardown, withdrawal and ``on_kill`` look for."""
    own: tuple[Resource, ...] = (PROVISIONING_REQUESTS, POD_TEMPLATES)
    if mode is ReservationMode.KUEUE:
        own = (JOBS,)
    elif mode is ReservationMode.WORKLOAD:
        own = (POD_GROUPS,)
    return (*own, *_COMMON_KINDS)


def gang_targets(gang: str, mode: ReservationMode, kinds: Iterable[Resource] | None = None) -> tuple[DeleteTarget, ...]:
    """Every object of gang ``gang`` of the ``kinds`` (default: :func:`gang_kinds`), by the gang's label."""
    selector = f"{naming.GANG_LABEL}={gang}"
    return tuple(DeleteTarget(resource=kind.key, label_selector=selector) for kind in kinds or gang_kinds(mode))


def kill_targets(spec: GangSpec) -> tuple[DeleteTarget, ...]:
    """``delete_on_kill`` for the triggers: every kind the gang may have, by the gang's label."""
    return gang_targets(spec.name, spec.mode)


async def _delete_target(client: KubeClient, namespace: str, target: DeleteTarget) -> int:
    """Delete what ``target`` names; how many objects were deleted now. Raises the first error."""
    resource = by_key(target.resource)
    names = [target.name] if target.name else []
    if target.label_selector:
        try:
            items, _ = await client.list(resource, namespace, label_selector=target.label_selector)
        except errors.NotFound:
            return 0  # the kind is not served here
        names.extend(str(item["metadata"]["name"]) for item in items)
    deleted = await asyncio.gather(
        *(client.delete(resource, name, namespace) for name in names), return_exceptions=True
    )
    failure = next((result for result in deleted if isinstance(result, BaseException)), None)
    if failure is not None:
        raise failure
    return sum(bool(result) for result in deleted)


async def _delete_pass(
    client: KubeClient, namespace: str, targets: Sequence[DeleteTarget]
) -> tuple[int, errors.KubeError | None]:
    """One pass over every target; the number deleted and the first API error, if any (anything
    else is raised)."""
    counts = await asyncio.gather(
        *(_delete_target(client, namespace, target) for target in targets), return_exceptions=True
    )
    unexpected = next(
        (count for count in counts if isinstance(count, BaseException) and not isinstance(count, errors.KubeError)),
        None,
    )
    if unexpected is not None:
        raise unexpected
    first_error = next((count for count in counts if isinstance(count, errors.KubeError)), None)
    return sum(count for count in counts if isinstance(count, int)), first_error


async def delete_gang(client: KubeClient, namespace: str, targets: Sequence[DeleteTarget]) -> int:
    """Delete every object ``targets`` name in ``namespace``; how many were deleted (see the module
    docstring for the error policy)."""
    deleted, attempt = 0, 1
    while True:
        count, error = await _delete_pass(client, namespace, targets)
        deleted += count
        if error is None:
            return deleted
        if not error.retryable or attempt == DELETE_PASSES:
            raise error
        await asyncio.sleep(client.retry.delay(attempt))
        attempt += 1


async def teardown(client: KubeClient, spec: GangSpec, *, keep_members: bool = False) -> int:
    """Delete every object of the gang; returns how many were deleted.

    ``keep_members`` (``on_finish="keep"`` after a success) deletes only what holds or describes the
    reservation - ProvisioningRequest, PodTemplate, Service - and keeps the finished member pods with
    what owns them (the owner ConfigMap; in ``kueue`` mode the finished Job, whose Workload holds no
    quota any more), so deleting the owner ConfigMap later removes the rest.
    """
    kinds = gang_kinds(spec.mode)
    if keep_members:
        kinds = tuple(kind for kind in kinds if kind not in (PODS, CONFIG_MAPS, JOBS))
    return await delete_gang(client, spec.namespace, gang_targets(spec.name, spec.mode, kinds))


async def withdraw(client: KubeClient, namespace: str, gangs: Iterable[str], mode: ReservationMode) -> int:
    """Delete what earlier tries of a ``mode`` task left (their reservation requests, gated or stray pods)."""
    targets = [target for gang in dict.fromkeys(gangs) for target in gang_targets(gang, mode)]
    return await delete_gang(client, namespace, targets) if targets else 0


async def read_owner(client: KubeClient, gang: str, namespace: str) -> dict[str, Any] | None:
    """The gang's owner ConfigMap as it is now; ``None`` if it is gone."""
    try:
        return await client.get(CONFIG_MAPS, naming.GangNames(gang).owner, namespace)
    except errors.NotFound:
        return None


async def delete_owner_if_unchanged(client: KubeClient, namespace: str, owner: Mapping[str, Any]) -> bool | None:
    """Delete the owner ConfigMap ``owner`` only if its uid and resourceVersion are still those read
    (DeleteOptions preconditions: an atomic compare-and-delete). ``True``: deleted; ``False``: it was
    already gone; ``None``: it changed since (the API server answered 409), so nothing was deleted."""
    metadata = owner["metadata"]
    unchanged = {"uid": str(metadata["uid"]), "resourceVersion": str(metadata["resourceVersion"])}
    try:
        return await client.delete(CONFIG_MAPS, str(metadata["name"]), namespace, preconditions=unchanged)
    except errors.Conflict:
        return None


async def withdraw_unless_claimed(
    client: KubeClient, namespace: str, gang: str, *, up_to_try: int, mode: ReservationMode | None = None
) -> int | None:
    """Delete gang ``gang`` unless a try later than ``up_to_try`` owns it now; how many objects were
    deleted, or ``None`` when it was kept.

    The owner ConfigMap is read, kept if its mark (``manifests.owner.OWNER_TRY_ANNOTATION``) names a
    try after ``up_to_try`` (a cleared task's new try adopted it), else deleted with that read's uid
    and resourceVersion as preconditions (kept too if it changed meanwhile: an adopting try's mark);
    then every object by the gang's label, of ``mode``'s kinds or, unknown, of every mode's
    (:data:`ANY_MODE_KINDS`). A gang without an owner has its objects deleted all the same. Errors
    follow :func:`delete_gang`'s policy.
    """
    owner = await read_owner(client, gang, namespace)
    deleted = 0
    if owner is not None:
        marked = manifests_owner.recorded_owner_try(owner)
        if marked is not None and marked > up_to_try:
            return None
        outcome = await delete_owner_if_unchanged(client, namespace, owner)
        if outcome is None:
            return None
        deleted += int(outcome)
    kinds = gang_kinds(mode) if mode is not None else ANY_MODE_KINDS
    return deleted + await delete_gang(client, namespace, gang_targets(gang, ReservationMode.KUEUE, kinds))

"""Reading a gang's objects for the operator: what the triggers watch, whether an earlier try's
gang is intact, the reservation just before launch; and, for the clean-up
from outside a task (``airflow_provider_gang.sweep``), every gang a namespace holds
(:func:`gang_owners`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CONFIG_MAPS, POD_GROUPS, PODS, PROVISIONING_REQUESTS, Resource
from airflow_provider_gang.reservation import decision, manifests, naming, shape
from airflow_provider_gang.reservation.decision import Decision, Observed, Policy, Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


@dataclass(frozen=True)
class GangOwner:
    """A gang as its owner ConfigMap shows it: the gang name, the namespace, the try that marked it
    last (``None``: unmarked), the reservation mode it recorded (``None``: unreadable), and whether
    it is being deleted already."""

    gang: str
    namespace: str
    owner_try: int | None
    mode: ReservationMode | None
    deleting: bool


@dataclass(frozen=True)
class Watch:
    """What the triggers watch for ``spec`` (see ``triggers.observation.GangObjects``);
    ``gated_pod_selector``: the members the reservation wait watches (``gates``: gated; ``workload``:
    linked to the PodGroup, which the triggers find by the gang's name)."""

    provisioning_request: str | None
    workload_selector: str | None
    gated_pod_selector: str | None
    scheduling_gate: str | None
    member_selector: str


def watch_targets(spec: GangSpec, job_uid: str | None = None) -> Watch:
    """Names and selectors of what the triggers watch for ``spec``."""
    names = naming.GangNames(spec.name)
    members_up_front = spec.mode in (ReservationMode.GATES, ReservationMode.WORKLOAD)
    return Watch(
        provisioning_request=names.provisioning_request if spec.mode.uses_provisioning_request else None,
        workload_selector=f"{KUEUE_JOB_UID_LABEL}={job_uid}" if job_uid else None,
        gated_pod_selector=manifests.common.member_selector(spec) if members_up_front else None,
        scheduling_gate=names.scheduling_gate if spec.mode is ReservationMode.GATES else None,
        member_selector=manifests.common.member_selector(spec),
    )


async def gang_owners(client: KubeClient, namespace: str | None) -> list[GangOwner]:
    """Every gang of ``namespace`` (``None``: all namespaces) by its owner ConfigMap (label
    ``airflow-gang.io/role=owner``, ``reservation.manifests.owner``), sorted by namespace and name.
    One LIST; its errors are raised (``kube.errors``)."""
    selector = f"{naming.ROLE_LABEL}={manifests.common.ROLE_OWNER}"
    items, _ = await client.list(CONFIG_MAPS, namespace, label_selector=selector)
    found = []
    for item in items:
        metadata = item.get("metadata") or {}
        labels = metadata.get("labels") or {}
        gang = labels.get(naming.GANG_LABEL)
        if not isinstance(gang, str) or not gang:
            continue
        recorded = (item.get("data") or {}).get("mode")
        found.append(
            GangOwner(
                gang=gang,
                namespace=str(metadata.get("namespace") or namespace or ""),
                owner_try=manifests.owner.recorded_owner_try(item),
                mode=ReservationMode(recorded) if recorded in {mode.value for mode in ReservationMode} else None,
                deleting=bool(metadata.get("deletionTimestamp")),
            )
        )
    return sorted(found, key=lambda owner: (owner.namespace, owner.gang))


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


async def recheck_reservation(client: KubeClient, spec: GangSpec, *, started_at: float, now: float) -> Decision | None:
    """The reservation decision just before launching, for the modes with a ProvisioningRequest.

    A deferred task resumes on a worker some time after its trigger fired; if that took longer than
    the 10-minute booking (or the capacity was revoked meanwhile), members created now would not
    consume anything. ``None`` for ``kueue`` (Kueue itself starts the admitted Job). ``workload``:
    the PodGroup and its members are read again, so a member deleted since the event is caught.
    """
    if spec.mode is ReservationMode.KUEUE:
        return None
    names = naming.GangNames(spec.name)
    request = await _get_or_none(client, PROVISIONING_REQUESTS, names.provisioning_request, spec.namespace, spec)
    group = await _get_or_none(client, POD_GROUPS, names.pod_group, spec.namespace, spec)
    pods: list[dict[str, Any]] = []
    if spec.mode in (ReservationMode.GATES, ReservationMode.WORKLOAD):
        pods, _ = await client.list(PODS, spec.namespace, label_selector=manifests.common.member_selector(spec))
    observed = Observed(
        mode=spec.mode,
        stage=Stage.RESERVATION,
        size=spec.size,
        started_at=started_at,
        provisioning_request=request,
        pod_group=group,
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


async def _get_or_none(
    client: KubeClient, kind: Resource, name: str, namespace: str, spec: GangSpec
) -> dict[str, Any] | None:
    """``kind`` ``name``, or ``None`` when it is gone - or when ``spec``'s mode has no such object."""
    own = PROVISIONING_REQUESTS if spec.mode.uses_provisioning_request else POD_GROUPS
    if kind is not own:
        return None
    try:
        return await client.get(kind, name, namespace)
    except errors.NotFound:
        return None

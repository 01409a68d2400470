"""Metadata shared by every manifest of a gang: labels, owner reference, object header."""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.spec import GangSpec

ROLE_OWNER = "owner"
ROLE_RESERVATION = "reservation"
ROLE_MEMBER = "member"
ROLE_RENDEZVOUS = "rendezvous"


def gang_selector(spec: GangSpec) -> str:
    """Label selector matching every object of the gang (for list/watch and cleanup)."""
    return f"{naming.GANG_LABEL}={spec.name}"


def member_selector(spec: GangSpec) -> str:
    """Label selector matching the gang's member pods only."""
    return f"{gang_selector(spec)},{naming.ROLE_LABEL}={ROLE_MEMBER}"


def labels(spec: GangSpec, role: str, **extra: str) -> dict[str, str]:
    """User labels, then the provider's (which win): gang name and role, plus ``extra``."""
    return {**spec.labels, naming.GANG_LABEL: spec.name, naming.ROLE_LABEL: role, **extra}


def owner_reference(spec: GangSpec, owner_uid: str) -> dict[str, Any]:
    """A reference to the gang's owner ConfigMap. Not a controller reference (Kueue would read a
    controller owner as a parent workload); garbage collection needs only the uid."""
    if not owner_uid:
        raise ValueError("owner_uid is required: create the owner ConfigMap first and pass its metadata.uid")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": naming.GangNames(spec.name).owner,
        "uid": owner_uid,
        "controller": False,
        "blockOwnerDeletion": False,
    }


def metadata(spec: GangSpec, name: str, role: str, owner_uid: str | None, **extra_labels: str) -> dict[str, Any]:
    """``metadata`` of a namespaced object of the gang; owned by the ConfigMap when ``owner_uid`` is given."""
    meta: dict[str, Any] = {"name": name, "namespace": spec.namespace, "labels": labels(spec, role, **extra_labels)}
    if owner_uid is not None:
        meta["ownerReferences"] = [owner_reference(spec, owner_uid)]
    return meta

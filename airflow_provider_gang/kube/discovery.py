"""Prechecks: which API kinds the cluster serves, and what the caller may do with them.

Operators call these before creating anything, so that "Kueue is not installed" or "RBAC forbids
creating ProvisioningRequests" fails fast with a clear message instead of a gang that waits forever.
Discovery reads ``/api/v1`` or ``/apis/<group>/<version>`` (an ``APIResourceList``); authorization uses
a ``SelfSubjectAccessReview`` (the call behind ``kubectl auth can-i``).
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import SELF_SUBJECT_ACCESS_REVIEWS, Resource


async def served_plurals(client: KubeClient, api_version: str) -> frozenset[str]:
    """Resource plurals (subresources excluded) served under ``api_version``; empty if the group is absent."""
    path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    try:
        resource_list = await client.request_json("GET", path)
    except errors.NotFound:
        return frozenset()
    return frozenset(
        str(entry["name"])
        for entry in resource_list.get("resources") or ()
        if isinstance(entry, dict) and "/" not in str(entry.get("name", "/"))
    )


async def is_served(client: KubeClient, resource: Resource) -> bool:
    """Whether the cluster serves ``resource`` (its CRD is installed, for custom kinds)."""
    return resource.plural in await served_plurals(client, resource.api_version)


@dataclass(frozen=True)
class AccessDecision:
    """Answer of a SelfSubjectAccessReview: ``allowed`` and the authorizer's ``reason`` (may be empty)."""

    allowed: bool
    reason: str


async def can_i(
    client: KubeClient,
    verb: str,
    resource: Resource,
    namespace: str | None = None,
    *,
    subresource: str = "",
    name: str = "",
) -> AccessDecision:
    """Ask the API server whether the current credentials may ``verb`` the ``resource`` (only the
    object ``name``, if given: what a ``resourceNames`` rule grants)."""
    attributes = {"verb": verb, "group": resource.group, "version": resource.version, "resource": resource.plural}
    if resource.namespaced:
        attributes["namespace"] = namespace or client.namespace
    if subresource:
        attributes["subresource"] = subresource
    if name:
        attributes["name"] = name
    review = {
        "apiVersion": SELF_SUBJECT_ACCESS_REVIEWS.api_version,
        "kind": SELF_SUBJECT_ACCESS_REVIEWS.kind,
        "spec": {"resourceAttributes": attributes},
    }
    answer = await client.create(SELF_SUBJECT_ACCESS_REVIEWS, review)
    status = answer.get("status") or {}
    return AccessDecision(allowed=bool(status.get("allowed")), reason=str(status.get("reason", "")))

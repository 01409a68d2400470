"""Discovery documents (``/version``, ``/api``, ``/api/v1``, ``/apis``, per group and group-version).

Legacy (unaggregated) discovery only: kubectl asks for aggregated discovery first and falls back when
the answer is a plain ``application/json`` APIGroupList. ``/api/v1`` reports ``groupVersion: "v1"``
(kmock's ``"/v1"`` breaks kubectl's mapping of core kinds).
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver.registry import Registry, ResourceType

SERVER_VERSION = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-gang-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-11-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "log": ["get"], "binding": ["create"]}
_SUBRESOURCE_KIND = {"binding": "Binding"}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(registry: Registry, group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group(registry, g, v) for g, v in sorted(registry.group_versions().items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(group)
    if not group or not versions:
        return None
    return dict(_group(registry, group, versions), kind="APIGroup", apiVersion="v1")


def _entries(resource_type: ResourceType) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": resource_type.plural,
        "singularName": resource_type.singular,
        "namespaced": resource_type.namespaced,
        "kind": resource_type.kind,
        "verbs": list(resource_type.verbs),
    }
    if resource_type.short_names:
        entry["shortNames"] = list(resource_type.short_names)
    if resource_type.categories:
        entry["categories"] = list(resource_type.categories)
    entries = [entry]
    for subresource in sorted(resource_type.subresources):
        entries.append(
            {
                "name": f"{resource_type.plural}/{subresource}",
                "singularName": "",
                "namespaced": resource_type.namespaced,
                "kind": _SUBRESOURCE_KIND.get(subresource, resource_type.kind),
                "verbs": _SUBRESOURCE_VERBS.get(subresource, ["get"]),
            }
        )
    return entries


def api_resource_list(registry: Registry, api_version: str) -> dict[str, Any] | None:
    types = sorted(registry.in_group_version(api_version), key=lambda t: t.plural)
    if not types:
        return None
    resources = [entry for resource_type in types for entry in _entries(resource_type)]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version, "resources": resources}

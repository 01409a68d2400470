"""OpenAPI documents just rich enough for ``kubectl apply`` with its default validation.

- kubectl >= 1.27 reads ``/openapi/v3`` and the per group-version documents. Every kind gets a
  permissive schema (``x-kubernetes-preserve-unknown-fields``) with ``x-kubernetes-group-version-kind``,
  and its POST/PUT/PATCH operations declare the ``fieldValidation`` query parameter, so kubectl
  leaves validation to the server and sends ``fieldValidation=Strict``; the emulator then validates
  custom resources against their CRD schema.
- Older kubectl reads ``/openapi/v2`` as protobuf: an empty gnostic ``Document`` (swagger "2.0",
  info title/version) makes it skip client-side validation for every kind.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gang_sim.apiserver.registry import Registry, ResourceType

# gnostic openapi_v2.Document{swagger(1)="2.0", info(2)=Info{title(1)="gang-sim", version(2)="v0"}}
_INFO = b"\x0a\x08gang-sim" + b"\x12\x02v0"
OPENAPI_V2_PROTOBUF = b"\x0a\x032.0" + b"\x12" + bytes([len(_INFO)]) + _INFO


def _path_prefix(api_version: str) -> str:
    return f"api/{api_version}" if "/" not in api_version else f"apis/{api_version}"


def index(registry: Registry) -> dict[str, Any]:
    """``/openapi/v3``: one entry per served group-version."""
    paths: dict[str, Any] = {}
    for api_version in sorted({t.api_version for t in registry}):
        prefix = _path_prefix(api_version)
        digest = hashlib.sha256(json.dumps(document(registry, api_version), sort_keys=True).encode()).hexdigest()[:16]
        paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest.upper()}"}
    return {"paths": paths}


def _schema_name(resource_type: ResourceType) -> str:
    group = resource_type.group or "core"
    return f"io.gang-sim.{group}.{resource_type.version}.{resource_type.kind}"


def _operation(resource_type: ResourceType, action: str, with_body: bool) -> dict[str, Any]:
    gvk = {"group": resource_type.group, "version": resource_type.version, "kind": resource_type.kind}
    reference = {"$ref": f"#/components/schemas/{_schema_name(resource_type)}"}
    operation: dict[str, Any] = {
        "operationId": f"{action}{resource_type.kind}",
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
        ],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }
    if with_body:
        operation["requestBody"] = {"content": {"*/*": {"schema": reference}}, "required": True}
    return operation


def document(registry: Registry, api_version: str) -> dict[str, Any]:
    """The OpenAPI v3 document of one group-version."""
    schemas: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for resource_type in sorted(registry.in_group_version(api_version), key=lambda t: t.plural):
        schemas[_schema_name(resource_type)] = {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-group-version-kind": [
                {"group": resource_type.group, "version": resource_type.version, "kind": resource_type.kind}
            ],
        }
        base = f"/{_path_prefix(api_version)}"
        scoped = (
            f"{base}/namespaces/{{namespace}}/{resource_type.plural}"
            if resource_type.namespaced
            else (f"{base}/{resource_type.plural}")
        )
        paths[scoped] = {"post": _operation(resource_type, "post", True)}
        paths[f"{scoped}/{{name}}"] = {
            "put": _operation(resource_type, "put", True),
            "patch": _operation(resource_type, "patch", True),
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (gang-sim)", "version": "v1.37.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }

"""Admission of one create or update, then its commit: what a kube-apiserver does to every write.

- server-set metadata: ``uid``, ``creationTimestamp``, ``generation`` (1 on create, bumped only when
  something outside metadata/status changes), ``generateName``; a write that changes nothing bumps
  nothing and emits no event;
- admission per kind (:mod:`.kinds`): defaults, validation with real ``Status`` causes, status
  subresource semantics (the main resource keeps ``status``, ``/status`` changes only ``status``),
  custom resources validated against their CRD schema;
- optimistic concurrency: a stale ``metadata.resourceVersion`` gives 409 Conflict;
- ``metadata.managedFields`` per field manager (:mod:`.managed_fields`).

Upstream: ``staging/src/k8s.io/apiserver/pkg/registry/rest/create.go`` ``BeforeCreate`` and
``update.go`` ``BeforeUpdate``, ``registry/generic/registry/store.go`` ``Create``/``Update``.
The functions commit through :class:`.object_table.ObjectTable`; an update that clears the last
finalizer of a deleted object removes it through :class:`.deletion.Deleter`.
"""

from __future__ import annotations

import copy
from typing import Any

from gang_sim.apiserver import errors, garbage, managed_fields, validation
from gang_sim.apiserver.deletion import Deleter
from gang_sim.apiserver.kinds import strategy_for
from gang_sim.apiserver.kinds.base import omit_empty
from gang_sim.apiserver.object_copy import copy_metadata, copy_object
from gang_sim.apiserver.object_table import ObjectTable
from gang_sim.apiserver.registry import CRD_KEY, ResourceType, types_from_crd

Object = dict[str, Any]
_SERVER_FIELDS = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "generation",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)
"""Metadata a client cannot set on create: the server's."""


def serve_crd(table: ObjectTable, crd: Object) -> None:
    """Serve exactly the served versions of a committed CRD (versions no longer served disappear)."""
    spec = crd.get("spec") or {}
    table.registry.remove_storage(f"{spec.get('group', '')}/{(spec.get('names') or {}).get('plural', '')}")
    for served in types_from_crd(crd):
        table.registry.add(served)


def _check_namespace(table: ObjectTable, resource_type: ResourceType, metadata: Object, namespace: str | None) -> str:
    if not resource_type.namespaced:
        metadata.pop("namespace", None)
        return ""
    body_namespace = metadata.get("namespace")
    if namespace and body_namespace and body_namespace != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    chosen = namespace or body_namespace or "default"
    metadata["namespace"] = chosen
    if table.stored(("/namespaces", "", chosen)) is None:
        raise errors.not_found("namespaces", chosen)
    return chosen


def create(
    table: ObjectTable,
    resource_type: ResourceType,
    body: Object,
    namespace: str | None,
    *,
    field_validation: str,
    dry_run: bool,
    field_manager: str,
    apply_entries: list[Object] | None,
) -> Object:
    """Admit and commit a new object (as :meth:`.store.Store.create` documents); the stored object."""
    if "create" not in resource_type.verbs:
        raise errors.method_not_allowed(f"create is not supported on resources of kind {resource_type.plural}")
    validation.check_body_type(resource_type, body)
    new = copy_object(body)
    new["apiVersion"], new["kind"] = resource_type.api_version, resource_type.kind
    metadata = new.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise errors.bad_request("metadata must be an object")
    if metadata.get("resourceVersion"):
        # Upstream answers this with a bare 500 (rest.BeforeCreate), not a 4xx.
        raise errors.ApiError(500, "", "resourceVersion should not be set on objects to be created")
    for server_field in _SERVER_FIELDS:
        metadata.pop(server_field, None)
    if not metadata.get("name") and metadata.get("generateName"):
        metadata["name"] = table.generate_name(metadata["generateName"])
    namespace = _check_namespace(table, resource_type, metadata, namespace)
    metadata["uid"] = table.new_uid()
    strategy = strategy_for(resource_type)
    strategy.prepare_create(new, resource_type)
    omit_empty(new, resource_type.custom)
    causes = strategy.validate_create(new, resource_type, field_validation)
    if causes:
        raise errors.invalid(resource_type.kind, metadata.get("name", ""), causes, resource_type.group)
    if table.stored((resource_type.storage_key, namespace, metadata["name"])) is not None:
        raise errors.already_exists(resource_type.plural, metadata["name"], resource_type.group)
    metadata["creationTimestamp"] = table.timestamp()
    if strategy.tracks_generation:
        metadata["generation"] = 1
    managed_fields.assign(resource_type, new, None, field_manager, None, apply_entries, table.timestamp())
    if dry_run:
        return new
    committed = table.commit(resource_type, "ADDED", new, None)
    if resource_type.key == CRD_KEY:
        serve_crd(table, committed)
    return committed


def _missing_resource_version(resource_type: ResourceType, name: str) -> errors.ApiError:
    # Upstream builds this one from the resource, not the kind: 'provisioningrequests.<group> "x"'.
    cause = errors.field_cause(
        "FieldValueInvalid", "metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update"
    )
    return errors.invalid(resource_type.plural, name, [cause], resource_type.group)


def update(
    table: ObjectTable,
    deleter: Deleter,
    resource_type: ResourceType,
    body: Object,
    namespace: str | None,
    *,
    subresource: str | None,
    require_resource_version: bool,
    field_validation: str,
    dry_run: bool,
    field_manager: str,
    apply_entries: list[Object] | None,
) -> Object:
    """Admit and commit ``body`` over the stored object it names (PUT, or a patch's result); the stored
    object (or what a dry run would store). An object whose last finalizer goes while it is being
    deleted is removed, its DELETED state still listing the finalizers, as upstream."""
    metadata_in = body.get("metadata") or {}
    name = metadata_in.get("name") or ""
    if not name:
        cause = errors.field_cause("FieldValueRequired", "metadata.name", "Required value: name is required")
        raise errors.invalid(resource_type.kind, "", [cause], resource_type.group)
    namespace = table.namespace_for(resource_type, namespace or metadata_in.get("namespace"))
    old = table.get_stored(resource_type, name, namespace)
    given_version = str(metadata_in.get("resourceVersion") or "")
    if not given_version and require_resource_version and resource_type.custom:
        raise _missing_resource_version(resource_type, name)
    if given_version and given_version != old["metadata"]["resourceVersion"]:
        raise errors.conflict(resource_type.plural, name, resource_type.group)
    strategy = strategy_for(resource_type)
    if subresource == "status":
        new = {key: value for key, value in old.items() if key != "status"}
        new["metadata"] = copy_metadata(old["metadata"])
        if "status" in body:
            new["status"] = copy.deepcopy(body["status"])
        causes = strategy.validate_status_update(new, old, resource_type)
    elif subresource:
        raise errors.not_found(f"{resource_type.plural}/{subresource}", name, resource_type.group)
    else:
        validation.check_body_type(resource_type, body)
        new = copy_object(body)
        metadata = new.setdefault("metadata", {})
        for kept in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if kept in old["metadata"]:
                metadata[kept] = old["metadata"][kept]
            else:
                metadata.pop(kept, None)
        if resource_type.namespaced:
            metadata["namespace"] = namespace
        strategy.prepare_update(new, old, resource_type)
        omit_empty(new, resource_type.custom)
        causes = strategy.validate_update(new, old, resource_type, field_validation)
        causes += garbage.finalizer_causes(new, old)
    if causes:
        raise errors.invalid(resource_type.kind, name, causes, resource_type.group)
    new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
    new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
    managed_fields.assign(resource_type, new, old, field_manager, subresource, apply_entries, table.timestamp())
    if new == old:
        return old
    if strategy.tracks_generation and strategy.spec_changed(new, old):
        new["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
    if dry_run:
        return new
    if (
        new["metadata"].get("deletionTimestamp")
        and not new["metadata"].get("finalizers")
        and not new["metadata"].get("deletionGracePeriodSeconds")
    ):  # a graceful delete still under way stays: ShouldDeleteDuringUpdate in apiserver registry/store.go
        return deleter.remove(resource_type, old, old)
    committed = table.commit(resource_type, "MODIFIED", new, old)
    if resource_type.key == CRD_KEY:
        serve_crd(table, committed)
    return committed

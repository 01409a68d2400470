"""The emulator's in-memory object store: the semantics of a kube-apiserver without HTTP.

One asyncio event loop, no threads. Resource keys are ``"<apiVersion>/<plural>"`` (see
:mod:`airflow_provider_gang.sim.apiserver.registry`). What the store does on every write, like a real server:

- server-set metadata: ``uid``, ``creationTimestamp``, ``generation`` (1 on create, bumped only when
  something outside metadata/status changes), ``resourceVersion`` from one global counter,
  ``generateName``; a write that changes nothing bumps nothing and emits no event;
- admission per kind (:mod:`.kinds`): defaults, validation with real ``Status`` causes, status
  subresource semantics (main resource keeps ``status``, ``/status`` changes only ``status``),
  custom resources validated against their CRD schema;
- optimistic concurrency: a stale ``metadata.resourceVersion`` gives 409 Conflict;
- ``metadata.managedFields`` per field manager (:mod:`.managed_fields`), server-side apply with
  field ownership and conflicts (:mod:`.server_side_apply`);
- deletion: finalizers (``deletionTimestamp`` then DELETED once they are cleared) and ownerReference
  garbage collection with ``propagationPolicy`` Orphan / Background / Foreground (:mod:`.garbage`
  plans it, :mod:`.deletion` applies the plans);
- watch history with 410 Expired for compacted resourceVersions (:mod:`.watch`).

Stored objects are never mutated in place: every write builds a new dict, so events and history may
share them. Everything handed to callers is a deep copy.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from airflow_provider_gang.sim.apiserver import errors, garbage, managed_fields, patches, server_side_apply, validation
from airflow_provider_gang.sim.apiserver.deletion import DeletingObjectTable
from airflow_provider_gang.sim.apiserver.kinds import pods, strategy_for
from airflow_provider_gang.sim.apiserver.kinds.base import omit_empty
from airflow_provider_gang.sim.apiserver.object_copy import copy_metadata, copy_object
from airflow_provider_gang.sim.apiserver.object_table import ObjectId, Subscriber, rfc3339
from airflow_provider_gang.sim.apiserver.registry import CRD_KEY, Registry, ResourceType, types_from_crd

__all__ = ["CRD_KEY", "DEFAULT_NAMESPACES", "ObjectId", "Store", "Subscriber", "rfc3339"]

Object = dict[str, Any]
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Store(DeletingObjectTable):
    """In-memory API objects with admission, deletion and garbage collection (see module docstring).

    Options as :class:`.deletion.DeletingObjectTable` (``graceful_pod_deletion``: off, pods are
    removed at once; on, a pod bound to a node is only marked until deleted with grace 0, as a
    real kubelet does). The default namespaces exist from the start.
    """

    def __init__(
        self,
        *,
        registry: Registry | None = None,
        history_limit: int = 10_000,
        seed: int | None = None,
        wall_clock: Callable[[], float] = time.time,
        graceful_pod_deletion: bool = False,
    ) -> None:
        super().__init__(
            registry=registry,
            history_limit=history_limit,
            seed=seed,
            wall_clock=wall_clock,
            graceful_pod_deletion=graceful_pod_deletion,
        )
        for namespace in DEFAULT_NAMESPACES:
            self.create("v1/namespaces", {"metadata": {"name": namespace}})

    # ----------------------------------------------------------------- writing

    def _check_namespace(self, resource_type: ResourceType, metadata: Object, namespace: str | None) -> str:
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
        if ("", chosen) not in self._objects.get("/namespaces", {}):
            raise errors.not_found("namespaces", chosen)
        return chosen

    def create(
        self,
        resource: str,
        body: Object,
        namespace: str | None = None,
        *,
        field_validation: str = "Ignore",
        dry_run: bool = False,
        field_manager: str = managed_fields.DEFAULT_MANAGER,
        apply_entries: list[Object] | None = None,
    ) -> Object:
        """Create an object (201 semantics): server fields set, admission run; 409 if it exists.

        ``field_validation`` is the request's ``fieldValidation`` (Ignore/Warn prune unknown fields of
        custom resources, Strict rejects them with 400). ``field_manager`` gets an Update entry in
        ``managedFields`` unless ``apply_entries`` (a server-side apply's entries) are given.
        """
        resource_type = self.resolve(resource)
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
        for server_field in (
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "generation",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ):
            metadata.pop(server_field, None)
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = self._generate_name(metadata["generateName"])
        namespace = self._check_namespace(resource_type, metadata, namespace)
        metadata["uid"] = self._new_uid()
        strategy = strategy_for(resource_type)
        strategy.prepare_create(new, resource_type)
        omit_empty(new, resource_type.custom)
        causes = strategy.validate_create(new, resource_type, field_validation)
        if causes:
            raise errors.invalid(resource_type.kind, metadata.get("name", ""), causes, resource_type.group)
        if (namespace, metadata["name"]) in self._objects.get(resource_type.storage_key, {}):
            raise errors.already_exists(resource_type.plural, metadata["name"], resource_type.group)
        metadata["creationTimestamp"] = rfc3339(self._wall_clock())
        if strategy.tracks_generation:
            metadata["generation"] = 1
        managed_fields.assign(resource_type, new, None, field_manager, None, apply_entries, self.timestamp())
        if dry_run:
            return self._present(resource_type, new)
        committed = self._commit(resource_type, "ADDED", new, None)
        if resource_type.key == CRD_KEY:
            self.serve_crd(committed)
        return self._present(resource_type, committed)

    def serve_crd(self, crd: Object) -> None:
        """Serve exactly the served versions of a committed CRD (versions no longer served disappear)."""
        spec = crd.get("spec") or {}
        self.registry.remove_storage(f"{spec.get('group', '')}/{(spec.get('names') or {}).get('plural', '')}")
        for served in types_from_crd(crd):
            self.registry.add(served)

    def _update(
        self,
        resource_type: ResourceType,
        body: Object,
        namespace: str | None,
        *,
        subresource: str | None,
        require_resource_version: bool,
        field_validation: str,
        dry_run: bool = False,
        field_manager: str = managed_fields.DEFAULT_MANAGER,
        apply_entries: list[Object] | None = None,
    ) -> Object:
        metadata_in = body.get("metadata") or {}
        name = metadata_in.get("name") or ""
        if not name:
            raise errors.invalid(
                resource_type.kind,
                "",
                [errors.field_cause("FieldValueRequired", "metadata.name", "Required value: name is required")],
                resource_type.group,
            )
        namespace = self._namespace_for(resource_type, namespace or metadata_in.get("namespace"))
        old = self._stored(resource_type, name, namespace)
        given_version = str(metadata_in.get("resourceVersion") or "")
        if not given_version and require_resource_version and resource_type.custom:
            # Upstream builds this one from the resource, not the kind: 'provisioningrequests.<group> "x"'.
            raise errors.invalid(
                resource_type.plural,
                name,
                [
                    errors.field_cause(
                        "FieldValueInvalid",
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
                resource_type.group,
            )
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
        managed_fields.assign(resource_type, new, old, field_manager, subresource, apply_entries, self.timestamp())
        if new == old:
            return self._present(resource_type, old)
        if strategy.tracks_generation and strategy.spec_changed(new, old):
            new["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if dry_run:
            return self._present(resource_type, new)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            # Upstream deletes the stored object as it was: DELETED (and the answer) still list the finalizers.
            return self._present(resource_type, self._remove(resource_type, old, old))
        committed = self._commit(resource_type, "MODIFIED", new, old)
        if resource_type.key == CRD_KEY:
            self.serve_crd(committed)
        return self._present(resource_type, committed)

    def bind_pod(self, namespace: str, name: str, node_name: str) -> Object:
        """The ``pods/binding`` subresource: set ``spec.nodeName`` and ``PodScheduled=True``.

        409 if the pod is already bound, 422 while it has scheduling gates (upstream binding rules).
        """
        resource_type = self.resolve("v1/pods")
        old = self._stored(resource_type, name, namespace)
        new = pods.bound(old, node_name)
        return self._present(resource_type, self._commit(resource_type, "MODIFIED", new, old))

    def replace(
        self,
        resource: str,
        body: Object,
        *,
        subresource: str | None = None,
        namespace: str | None = None,
        field_validation: str = "Ignore",
        dry_run: bool = False,
        field_manager: str = managed_fields.DEFAULT_MANAGER,
        apply_entries: list[Object] | None = None,
    ) -> Object:
        """PUT: replace the object named in ``body``; 409 Conflict on a stale resourceVersion.

        Custom resources require ``metadata.resourceVersion`` (422), built-ins allow unconditional
        updates, as upstream. ``field_manager``/``apply_entries`` as for :meth:`create`.
        """
        resource_type = self.resolve(resource)
        return self._update(
            resource_type,
            body,
            namespace,
            subresource=subresource,
            require_resource_version=True,
            field_validation=field_validation,
            dry_run=dry_run,
            field_manager=field_manager,
            apply_entries=apply_entries,
        )

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
        field_validation: str = "Ignore",
        dry_run: bool = False,
        field_manager: str = managed_fields.DEFAULT_MANAGER,
        force: bool = False,
    ) -> Object:
        """Apply a ``merge``/``json``/``strategic`` patch (see :mod:`.patches`) as an Update of
        ``field_manager``, or an ``apply`` patch as its server-side apply (:mod:`.server_side_apply`,
        ``force`` takes conflicting fields over; creates the object when it does not exist).

        ``strategic`` on a custom resource is 415. A ``metadata.resourceVersion`` in a patch is a
        precondition (409 when stale).
        """
        resource_type = self.resolve(resource)
        if patch_type == "strategic" and resource_type.custom:
            raise errors.unsupported_media_type("application/strategic-merge-patch+json")
        target_namespace = self._namespace_for(resource_type, namespace)
        if patch_type == "apply":
            return server_side_apply.apply(
                self,
                resource_type,
                name,
                patch,
                namespace=target_namespace,
                subresource=subresource,
                manager=field_manager,
                force=force,
                field_validation=field_validation,
                dry_run=dry_run,
            )
        current = self._present(resource_type, self._stored(resource_type, name, target_namespace))
        patched = patches.apply(current, patch, patch_type, field_validation=field_validation)
        patched_metadata = patched.setdefault("metadata", {})
        if patched_metadata.get("name") != name:
            raise errors.bad_request("the name of the object cannot be changed by a patch")
        given_version = str(
            ((patch.get("metadata") or {}) if isinstance(patch, dict) else {}).get("resourceVersion") or ""
        )
        patched_metadata["resourceVersion"] = given_version or current["metadata"]["resourceVersion"]
        return self._update(
            resource_type,
            patched,
            target_namespace,
            subresource=subresource,
            require_resource_version=False,
            field_validation=field_validation,
            dry_run=dry_run,
            field_manager=field_manager,
        )

    # ----------------------------------------------------------------- deleting

    def delete(
        self,
        resource: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> Object:
        """Delete an object. Returns its last state (with ``deletionTimestamp`` when finalizers keep it).

        ``propagation_policy`` (Orphan / Background / Foreground) decides what happens to objects whose
        ownerReferences point at it; the default is Background, except batch/v1 Jobs which default to
        Orphan as upstream's ``jobStrategy.DefaultGarbageCollectionPolicy``. ``grace_period_seconds``
        matters for pods only: see :func:`.garbage.plan_delete` and ``graceful_pod_deletion``.
        ``dry_run`` (also on create/replace/patch) runs admission and returns the result without
        storing anything (``dryRun=All``).
        """
        resource_type = self.resolve(resource)
        obj = self._stored(resource_type, name, self._namespace_for(resource_type, namespace))
        policy = propagation_policy or garbage.default_policy(resource_type)
        if policy not in garbage.POLICIES:
            raise errors.invalid(
                "DeleteOptions",
                "",
                [errors.field_cause("FieldValueNotSupported", "propagationPolicy", f'Unsupported value: "{policy}"')],
            )
        if dry_run:
            return self._present(resource_type, obj)
        plan = garbage.plan_delete(self, resource_type, obj, policy, grace_period_seconds)
        return self._present(resource_type, self._apply_deletion(plan))

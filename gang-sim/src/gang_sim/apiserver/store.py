"""The emulator's in-memory object store: the semantics of a kube-apiserver without HTTP.

One asyncio event loop, no threads. Resource keys are ``"<apiVersion>/<plural>"`` (see
:mod:`gang_sim.apiserver.registry`). :class:`Store` is the API the HTTP layer and the simulated
controllers use; it composes three parts and adds the verbs' argument handling:

- :class:`.object_table.ObjectTable` (``store.table``): the stored objects, one global
  resourceVersion, watch history with 410 Expired for compacted versions (:mod:`.watch`),
  subscribers, and the public commit API every write ends in;
- :mod:`.writes`: admission of a create or update (server-set metadata, per-kind defaults and
  validation, status subresource, optimistic concurrency, ``managedFields``);
- :class:`.deletion.Deleter` (``store.deleter``): finalizers (``deletionTimestamp`` then DELETED once
  they are cleared) and ownerReference garbage collection with ``propagationPolicy`` Orphan /
  Background / Foreground, as :mod:`.garbage` plans it.

Patches (:mod:`.patches`) and server-side apply (:mod:`.server_side_apply`) turn into an update.
Stored objects are never mutated in place: every write builds a new dict, so events and history may
share them. Everything handed to callers is a deep copy, except :meth:`Store.view` and shared
subscriptions.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from gang_sim.apiserver import errors, garbage, managed_fields, patches, server_side_apply, writes
from gang_sim.apiserver.deletion import Deleter
from gang_sim.apiserver.kinds import pods
from gang_sim.apiserver.logs import PodLogs
from gang_sim.apiserver.object_table import ObjectId, ObjectTable, Subscriber, rfc3339
from gang_sim.apiserver.owner_index import OwnerIndex
from gang_sim.apiserver.registry import CRD_KEY, Registry, ResourceType
from gang_sim.apiserver.watch import WatchStream

__all__ = ["CRD_KEY", "DEFAULT_NAMESPACES", "ObjectId", "Store", "Subscriber", "rfc3339"]

Object = dict[str, Any]
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Store:
    """In-memory API objects with admission, deletion and garbage collection (see module docstring).

    ``history_limit`` bounds the kept events (older resourceVersions get 410); ``seed`` makes
    generated names and uids reproducible; ``wall_clock`` stamps timestamps. The default
    namespaces exist from the start. The store is the :class:`.garbage.ObjectsView` deletions are
    planned from.
    """

    def __init__(
        self,
        *,
        registry: Registry | None = None,
        history_limit: int = 10_000,
        seed: int | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = ObjectTable(registry=registry, history_limit=history_limit, seed=seed, wall_clock=wall_clock)
        self.deleter = Deleter(self.table, self)
        for namespace in DEFAULT_NAMESPACES:
            self.create("v1/namespaces", {"metadata": {"name": namespace}})

    # ----------------------------------------------------------------- reading (the table's)

    @property
    def registry(self) -> Registry:
        """The served resource types: built-ins and the versions of every stored CRD."""
        return self.table.registry

    @property
    def logs(self) -> PodLogs:
        return self.table.logs

    @property
    def owners(self) -> OwnerIndex:
        return self.table.owners

    @property
    def resource_version(self) -> str:
        """The newest committed resourceVersion (what a list reports)."""
        return self.table.resource_version

    def timestamp(self, after_seconds: int = 0) -> str:
        return self.table.timestamp(after_seconds)

    def compact_history(self) -> None:
        self.table.compact_history()

    def resolve(self, resource: str) -> ResourceType:
        return self.table.resolve(resource)

    def get(self, resource: str, name: str, namespace: str | None = None) -> Object:
        return self.table.get(resource, name, namespace)

    def list(
        self, resource: str, namespace: str | None = None, *, label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[Object], str]:
        return self.table.list(resource, namespace, label_selector=label_selector, field_selector=field_selector)

    def list_page(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        after: tuple[str, str] | None = None,
        limit: int = 0,
    ) -> tuple[builtins.list[Object], str, int]:
        return self.table.list_page(
            resource, namespace, label_selector=label_selector, field_selector=field_selector, after=after, limit=limit
        )

    def view(self, resource: str, namespace: str | None = None) -> builtins.list[Object]:
        return self.table.view(resource, namespace)

    def iter_objects(self, storage_key: str) -> Iterator[Object]:
        return self.table.iter_objects(storage_key)

    def stored(self, object_id: ObjectId) -> Object | None:
        return self.table.stored(object_id)

    def type_of(self, storage_key: str) -> ResourceType:
        return self.table.type_of(storage_key)

    def subscribe(self, callback: Subscriber, *, shared: bool = False) -> Callable[[], None]:
        return self.table.subscribe(callback, shared=shared)

    def open_watch(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> WatchStream:
        return self.table.open_watch(
            resource,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    def close_watch(self, stream: WatchStream) -> None:
        self.table.close_watch(stream)

    def close_all_watches(self) -> None:
        self.table.close_all_watches()

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> AsyncIterator[tuple[str, Object]]:
        return self.table.watch(
            resource,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    # ----------------------------------------------------------------- writing

    def create(
        self,
        resource: str,
        body: Object,
        namespace: str | None = None,
        *,
        field_validation: str = "Ignore",
        dry_run: bool = False,
        field_manager: str = managed_fields.DEFAULT_MANAGER,
        apply_entries: builtins.list[Object] | None = None,
    ) -> Object:
        """Create an object (201 semantics): server fields set, admission run; 409 if it exists.

        ``field_validation`` is the request's ``fieldValidation`` (Ignore/Warn prune unknown fields of
        custom resources, Strict rejects them with 400). ``field_manager`` gets an Update entry in
        ``managedFields`` unless ``apply_entries`` (a server-side apply's entries) are given.
        """
        resource_type = self.resolve(resource)
        created = writes.create(
            self.table,
            resource_type,
            body,
            namespace,
            field_validation=field_validation,
            dry_run=dry_run,
            field_manager=field_manager,
            apply_entries=apply_entries,
        )
        return self.table.present(resource_type, created)

    def serve_crd(self, crd: Object) -> None:
        """Serve exactly the served versions of a committed CRD (versions no longer served disappear)."""
        writes.serve_crd(self.table, crd)

    def bind_pod(self, namespace: str, name: str, node_name: str) -> Object:
        """The ``pods/binding`` subresource: set ``spec.nodeName`` and ``PodScheduled=True``.

        409 if the pod is already bound, 422 while it has scheduling gates (upstream binding rules).
        """
        resource_type = self.resolve("v1/pods")
        old = self.table.get_stored(resource_type, name, namespace)
        new = pods.bound(old, node_name)
        return self.table.present(resource_type, self.table.commit(resource_type, "MODIFIED", new, old))

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
        apply_entries: builtins.list[Object] | None = None,
    ) -> Object:
        """PUT: replace the object named in ``body``; 409 Conflict on a stale resourceVersion.

        Custom resources require ``metadata.resourceVersion`` (422), built-ins allow unconditional
        updates, as upstream. ``field_manager``/``apply_entries`` as for :meth:`create`.
        """
        resource_type = self.resolve(resource)
        updated = writes.update(
            self.table,
            self.deleter,
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
        return self.table.present(resource_type, updated)

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
        target_namespace = self.table.namespace_for(resource_type, namespace)
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
        current = self.table.present(resource_type, self.table.get_stored(resource_type, name, target_namespace))
        patched = patches.apply(current, patch, patch_type, field_validation=field_validation)
        patched_metadata = patched.setdefault("metadata", {})
        if patched_metadata.get("name") != name:
            raise errors.bad_request("the name of the object cannot be changed by a patch")
        given_version = str(
            ((patch.get("metadata") or {}) if isinstance(patch, dict) else {}).get("resourceVersion") or ""
        )
        patched_metadata["resourceVersion"] = given_version or current["metadata"]["resourceVersion"]
        updated = writes.update(
            self.table,
            self.deleter,
            resource_type,
            patched,
            target_namespace,
            subresource=subresource,
            require_resource_version=False,
            field_validation=field_validation,
            dry_run=dry_run,
            field_manager=field_manager,
            apply_entries=None,
        )
        return self.table.present(resource_type, updated)

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
        matters for pods only: a pod bound to a node is marked until its kubelet deletes it with
        grace 0, as :func:`.garbage.plan_delete` says.
        ``dry_run`` (also on create/replace/patch) runs admission and returns the result without
        storing anything (``dryRun=All``).
        """
        resource_type = self.resolve(resource)
        obj = self.table.get_stored(resource_type, name, self.table.namespace_for(resource_type, namespace))
        policy = propagation_policy or garbage.default_policy(resource_type)
        if policy not in garbage.POLICIES:
            raise errors.invalid(
                "DeleteOptions",
                "",
                [errors.field_cause("FieldValueNotSupported", "propagationPolicy", f'Unsupported value: "{policy}"')],
            )
        if dry_run:
            return self.table.present(resource_type, obj)
        plan = garbage.plan_delete(self, resource_type, obj, policy, grace_period_seconds)
        return self.table.present(resource_type, self.deleter.apply_plan(plan))

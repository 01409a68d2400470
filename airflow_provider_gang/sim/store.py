"""The emulator's in-memory object store: the semantics of a kube-apiserver without HTTP.

One asyncio event loop, no threads. Resource keys are ``"<apiVersion>/<plural>"`` (see
:mod:`airflow_provider_gang.sim.registry`). What the store does on every write, like a real server:

- server-set metadata: ``uid``, ``creationTimestamp``, ``generation`` (1 on create, bumped only when
  something outside metadata/status changes), ``resourceVersion`` from one global counter,
  ``generateName``; a write that changes nothing bumps nothing and emits no event;
- admission per kind (:mod:`.kinds`): defaults, validation with real ``Status`` causes, status
  subresource semantics (main resource keeps ``status``, ``/status`` changes only ``status``),
  custom resources validated against their CRD schema;
- optimistic concurrency: a stale ``metadata.resourceVersion`` gives 409 Conflict;
- deletion: finalizers (``deletionTimestamp`` then DELETED once they are cleared) and ownerReference
  garbage collection with ``propagationPolicy`` Orphan / Background / Foreground (:mod:`.garbage`);
- watch history with 410 Expired for compacted resourceVersions (:mod:`.watch`).

Stored objects are never mutated in place: every write builds a new dict, so events and history may
share them. Everything handed to callers is a deep copy.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from airflow_provider_gang.sim import errors, garbage, patches, validation
from airflow_provider_gang.sim.kinds import pods, strategy_for
from airflow_provider_gang.sim.logs import PodLogs
from airflow_provider_gang.sim.registry import Registry, ResourceType, types_from_crd
from airflow_provider_gang.sim.selectors import object_matcher
from airflow_provider_gang.sim.watch import Event, WatchHub, WatchStream

Object = dict[str, Any]
Subscriber = Callable[[str, str, Object], Any]
ObjectId = tuple[str, str, str]  # (storage key, namespace, name)

_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # upstream utilrand.String
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
CRD_KEY = "apiextensions.k8s.io/v1/customresourcedefinitions"


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Store:
    """In-memory API objects with watch, admission and garbage collection (see module docstring).

    ``history_limit`` bounds the kept events (older resourceVersions get 410); ``seed`` makes
    generated names and uids reproducible; ``wall_clock`` stamps creation/deletion timestamps.
    """

    def __init__(
        self,
        *,
        registry: Registry | None = None,
        history_limit: int = 10_000,
        seed: int | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry or Registry()
        self.logs = PodLogs(wall_clock)
        self._wall_clock = wall_clock
        self._random = random.Random(seed)
        self._seeded = seed is not None
        self._objects: dict[str, dict[tuple[str, str], Object]] = {}
        self._resource_version = 0
        self._hub = WatchHub(history_limit)
        self._subscribers: list[Subscriber] = []
        self.dependents: dict[str, set[ObjectId]] = {}  # owner uid -> objects naming it in ownerReferences
        self.uids: dict[str, ObjectId] = {}  # uid -> object, for every stored object
        self._background: set[asyncio.Task[Any]] = set()
        for namespace in DEFAULT_NAMESPACES:
            self.create("v1/namespaces", {"metadata": {"name": namespace}})

    # ----------------------------------------------------------------- reading

    @property
    def resource_version(self) -> str:
        """The newest committed resourceVersion (what a list reports)."""
        return str(self._resource_version)

    def compact_history(self) -> None:
        """Forget the event history so far, like a watch cache that starts now (older versions: 410)."""
        self._hub.history.compact(self._resource_version)

    def resolve(self, resource: str) -> ResourceType:
        return self.registry.resolve(resource)

    def _namespace_for(self, resource_type: ResourceType, namespace: str | None) -> str:
        return (namespace or "default") if resource_type.namespaced else ""

    def _stored(self, resource_type: ResourceType, name: str, namespace: str) -> Object:
        found = self._objects.get(resource_type.storage_key, {}).get((namespace, name))
        if found is None:
            raise errors.not_found(resource_type.plural, name, resource_type.group)
        return found

    def _present(self, resource_type: ResourceType, obj: Object) -> Object:
        presented = copy.deepcopy(obj)
        presented["apiVersion"] = resource_type.api_version
        return presented

    def get(self, resource: str, name: str, namespace: str | None = None) -> Object:
        """One object (a copy); 404 NotFound if absent."""
        resource_type = self.resolve(resource)
        return self._present(
            resource_type, self._stored(resource_type, name, self._namespace_for(resource_type, namespace))
        )

    def list(
        self, resource: str, namespace: str | None = None, *, label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[Object], str]:
        """Matching objects (copies, ordered by namespace then name) and the list's resourceVersion.

        ``namespace=None`` lists across all namespaces.
        """
        resource_type = self.resolve(resource)
        matches = object_matcher(label_selector, field_selector, resource_type.storage_key)
        items = [
            self._present(resource_type, obj)
            for (obj_namespace, _), obj in sorted(self._objects.get(resource_type.storage_key, {}).items())
            if (not namespace or not resource_type.namespaced or obj_namespace == namespace) and matches(obj)
        ]
        return items, self.resource_version

    def iter_objects(self, storage_key: str) -> Iterator[Object]:
        """The stored objects of one storage key, shared (read-only: do not mutate)."""
        return iter(list(self._objects.get(storage_key, {}).values()))

    # ----------------------------------------------------------------- committing

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event_type, resource_key, obj_copy)`` after every committed change, in order.

        ``resource_key`` uses the storage version. A callback returning an awaitable is scheduled as
        a task. Returns a function that unsubscribes.
        """
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def _commit(self, resource_type: ResourceType, event_type: str, new: Object, old: Object | None) -> Object:
        self._resource_version += 1
        new["metadata"]["resourceVersion"] = str(self._resource_version)
        metadata = new["metadata"]
        identity = (metadata.get("namespace") or "", metadata["name"])
        bucket = self._objects.setdefault(resource_type.storage_key, {})
        if event_type == "DELETED":
            bucket.pop(identity, None)
        else:
            bucket[identity] = new
        garbage.index_owners(self, (resource_type.storage_key, *identity), old, new, event_type)
        self._hub.publish(Event(self._resource_version, resource_type.storage_key, event_type, new, old))
        for callback in list(self._subscribers):
            result = callback(event_type, resource_type.storage_resource_key, copy.deepcopy(new))
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._background.add(task)
                task.add_done_callback(self._background.discard)
        return new

    # ----------------------------------------------------------------- writing

    def _generate_name(self, prefix: str) -> str:
        return prefix + "".join(self._random.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))

    def _new_uid(self) -> str:
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4)) if self._seeded else str(uuid.uuid4())

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
    ) -> Object:
        """Create an object (201 semantics): server fields set, admission run; 409 if it exists.

        ``field_validation`` is the request's ``fieldValidation`` (Ignore/Warn prune unknown fields of
        custom resources, Strict rejects them with 400).
        """
        resource_type = self.resolve(resource)
        if "create" not in resource_type.verbs:
            raise errors.method_not_allowed(f"create is not supported on resources of kind {resource_type.plural}")
        validation.check_body_type(resource_type, body)
        new = copy.deepcopy(body)
        new["apiVersion"], new["kind"] = resource_type.api_version, resource_type.kind
        metadata = new.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
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
        causes = strategy.validate_create(new, resource_type, field_validation)
        if causes:
            raise errors.invalid(resource_type.kind, metadata.get("name", ""), causes, resource_type.group)
        if (namespace, metadata["name"]) in self._objects.get(resource_type.storage_key, {}):
            raise errors.already_exists(resource_type.plural, metadata["name"], resource_type.group)
        metadata["creationTimestamp"] = rfc3339(self._wall_clock())
        metadata["generation"] = 1
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
            raise errors.invalid(
                resource_type.kind,
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
            new["metadata"] = copy.deepcopy(old["metadata"])
            if "status" in body:
                new["status"] = copy.deepcopy(body["status"])
            causes = strategy.validate_status_update(new, old, resource_type)
        elif subresource:
            raise errors.not_found(f"{resource_type.plural}/{subresource}", name, resource_type.group)
        else:
            validation.check_body_type(resource_type, body)
            new = copy.deepcopy(body)
            metadata = new.setdefault("metadata", {})
            for kept in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                if kept in old["metadata"]:
                    metadata[kept] = old["metadata"][kept]
                else:
                    metadata.pop(kept, None)
            if resource_type.namespaced:
                metadata["namespace"] = namespace
            strategy.prepare_update(new, old, resource_type)
            causes = strategy.validate_update(new, old, resource_type, field_validation)
            causes += garbage.finalizer_causes(new, old)
        if causes:
            raise errors.invalid(resource_type.kind, name, causes, resource_type.group)
        new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return self._present(resource_type, old)
        if strategy.spec_changed(new, old):
            new["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if dry_run:
            return self._present(resource_type, new)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            return self._present(resource_type, self._remove(resource_type, new, old))
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
    ) -> Object:
        """PUT: replace the object named in ``body``; 409 Conflict on a stale resourceVersion.

        Custom resources require ``metadata.resourceVersion`` (422), built-ins allow unconditional
        updates, as upstream.
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
    ) -> Object:
        """Apply a ``merge``/``json``/``strategic``/``apply`` patch (see :mod:`.patches`).

        ``strategic`` on a custom resource is 415. A ``metadata.resourceVersion`` in a merge patch is a
        precondition (409 when stale). ``apply`` creates the object when it does not exist (server-side
        apply, approximated as a merge patch without field ownership).
        """
        resource_type = self.resolve(resource)
        if patch_type == "strategic" and resource_type.custom:
            raise errors.unsupported_media_type("application/strategic-merge-patch+json")
        target_namespace = self._namespace_for(resource_type, namespace)
        if patch_type == "apply" and subresource is None:
            existing = self._objects.get(resource_type.storage_key, {}).get((target_namespace, name))
            if existing is None:
                body = dict(patch) if isinstance(patch, dict) else {}
                body.setdefault("metadata", {})["name"] = name
                return self.create(resource, body, namespace, field_validation=field_validation, dry_run=dry_run)
        current = self._present(resource_type, self._stored(resource_type, name, target_namespace))
        patched = patches.apply(current, patch, patch_type)
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
        is accepted and ignored: deletion is immediate (no kubelet grace period is modelled).
        ``dry_run`` (also on create/replace/patch) runs admission and returns the result without
        storing anything (``dryRun=All``).
        """
        resource_type = self.resolve(resource)
        obj = self._stored(resource_type, name, self._namespace_for(resource_type, namespace))
        policy = propagation_policy or garbage.default_policy(resource_type)
        if policy not in ("Orphan", "Background", "Foreground"):
            raise errors.invalid(
                "DeleteOptions",
                "",
                [errors.field_cause("FieldValueNotSupported", "propagationPolicy", f'Unsupported value: "{policy}"')],
            )
        if dry_run:
            return self._present(resource_type, obj)
        return self._present(resource_type, garbage.delete(self, resource_type, obj, policy))

    def _remove(self, resource_type: ResourceType, last: Object, old: Object | None = None) -> Object:
        """Commit the removal of a stored object and run what follows a real deletion."""
        removed = self._commit(resource_type, "DELETED", copy.deepcopy(last), old or last)
        metadata = removed["metadata"]
        if resource_type.storage_key == "/pods":
            self.logs.forget_pod(metadata.get("namespace", ""), metadata["name"])
        garbage.after_removal(self, removed)
        if resource_type.key == CRD_KEY:
            group, plural = removed["spec"]["group"], removed["spec"]["names"]["plural"]
            storage_key = f"{group}/{plural}"
            served = self.registry.versions_of(storage_key)
            for obj in list(self._objects.get(storage_key, {}).values()):
                if served:
                    self._commit(served[0], "DELETED", copy.deepcopy(obj), obj)
            self._objects.pop(storage_key, None)
            self.registry.remove_storage(storage_key)
        return removed

    def type_of(self, storage_key: str) -> ResourceType:
        served = self.registry.versions_of(storage_key)
        if not served:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        return served[0]

    def stored(self, object_id: ObjectId) -> Object | None:
        """The stored object (shared, read-only) for (storage key, namespace, name), if any."""
        storage_key, namespace, name = object_id
        return self._objects.get(storage_key, {}).get((namespace, name))

    # ----------------------------------------------------------------- watching

    def open_watch(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> WatchStream:
        """Register a watch; the caller must ``close_watch`` it. 410 Expired for a compacted version.

        No ``resource_version`` (or ``""``/``"0"``): synthetic ADDED events for the current matching
        objects first; otherwise every change after that version, replayed from history.
        """
        resource_type = self.resolve(resource)
        matches = object_matcher(label_selector, field_selector, resource_type.storage_key)
        namespace = namespace if resource_type.namespaced else None
        current = self._objects.get(resource_type.storage_key, {}).values()
        return self._hub.open(resource_type.storage_key, namespace, matches, resource_version, current)

    def close_watch(self, stream: WatchStream) -> None:
        self._hub.close(stream)

    def close_all_watches(self) -> None:
        """End every open watch (server shutdown)."""
        self._hub.close_all()

    async def watch(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> AsyncIterator[tuple[str, Object]]:
        """Yield ``(event_type, object_copy)`` for changes, as :meth:`open_watch` describes."""
        resource_type = self.resolve(resource)
        stream = self.open_watch(
            resource,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        try:
            while True:
                delivery = await stream.queue.get()
                if delivery is None:
                    return
                yield delivery.type, self._present(resource_type, delivery.obj)
        finally:
            self.close_watch(stream)

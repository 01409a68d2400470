"""Stored objects, committed events and watches: the read side of the emulator's store.

:class:`ObjectTable` keeps the objects per storage key, assigns the one global resourceVersion on
commit, publishes each committed change to watches (:mod:`.watch`) and subscribers, and serves
reads (deep copies; for the in-process simulated controllers, :meth:`ObjectTable.view`: the stored
objects themselves, read-only) through the secondary indexes of :mod:`.object_index` (by namespace,
name and label value, so a LIST or watch by name costs the same with 30 objects as with 3,000),
and keeps the owner index of :mod:`.owner_index` (ownerReferences, for garbage collection).
Its commit API (:meth:`ObjectTable.commit`, :meth:`ObjectTable.new_uid`,
:meth:`ObjectTable.generate_name`, :meth:`ObjectTable.drop_storage`) stores what the caller already
admitted: :class:`.deletion.Deleter` (removal and garbage collection), :mod:`.writes` (admission of
creates and updates) and :func:`.crds.install_bundled_crds` write through it, and
:class:`.store.Store` composes them into the API verbs. Stored objects are never mutated in place,
so events and history may share them.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from gang_sim.apiserver import errors
from gang_sim.apiserver.logs import PodLogs
from gang_sim.apiserver.object_copy import json_copy
from gang_sim.apiserver.object_index import ObjectIndex
from gang_sim.apiserver.owner_index import ObjectId, OwnerIndex
from gang_sim.apiserver.registry import Registry, ResourceType
from gang_sim.apiserver.selectors import (
    object_matcher,
    parse_field_selector,
    parse_label_selector,
    selected_name,
)
from gang_sim.apiserver.watch import Event, WatchHub, WatchStream

__all__ = ["ObjectId", "ObjectTable", "Subscriber", "rfc3339"]

Object = dict[str, Any]
Subscriber = Callable[[str, str, Object], Any]

_log = logging.getLogger(__name__)
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # upstream utilrand.String


def rfc3339(seconds: float) -> str:
    """``seconds`` since the epoch as the apiserver writes times: UTC, whole seconds (metav1.Time)."""
    return datetime.fromtimestamp(int(seconds), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectTable:
    """Objects, resourceVersions, events, watches and subscribers (see module docstring).

    ``history_limit`` bounds the kept events (older resourceVersions get 410); ``seed`` makes
    generated names and uids reproducible; ``wall_clock`` stamps timestamps.
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
        self._indexes: dict[str, ObjectIndex] = {}
        self._resource_version = 0
        self._hub = WatchHub(history_limit)
        self._subscribers: list[Subscriber] = []
        self._shared_subscribers: set[Subscriber] = set()
        self.owners = OwnerIndex()  # who names whom in ownerReferences, and uid -> object
        self._background: set[asyncio.Task[Any]] = set()

    # ----------------------------------------------------------------- reading

    @property
    def resource_version(self) -> str:
        """The newest committed resourceVersion (what a list reports)."""
        return str(self._resource_version)

    def timestamp(self, after_seconds: int = 0) -> str:
        """Now (plus ``after_seconds``), as the second-precision RFC 3339 time of ``creationTimestamp``,
        ``deletionTimestamp`` and ``managedFields``."""
        return rfc3339(self._wall_clock() + after_seconds)

    def compact_history(self) -> None:
        """Forget the event history so far, like a watch cache that starts now (older versions: 410)."""
        self._hub.history.compact(self._resource_version)

    def resolve(self, resource: str) -> ResourceType:
        return self.registry.resolve(resource)

    def namespace_for(self, resource_type: ResourceType, namespace: str | None) -> str:
        """The namespace an object of ``resource_type`` lives in: ``""`` when cluster-scoped, else ``namespace``
        or ``default``."""
        return (namespace or "default") if resource_type.namespaced else ""

    def get_stored(self, resource_type: ResourceType, name: str, namespace: str) -> Object:
        """The stored object (shared, read-only); 404 NotFound if absent."""
        found = self._objects.get(resource_type.storage_key, {}).get((namespace, name))
        if found is None:
            raise errors.not_found(resource_type.plural, name, resource_type.group)
        return found

    def present(self, resource_type: ResourceType, obj: Object) -> Object:
        """A copy of the stored ``obj`` as a client reading ``resource_type``'s version sees it."""
        presented: Object = json_copy(obj)
        presented["apiVersion"] = resource_type.api_version
        return presented

    def get(self, resource: str, name: str, namespace: str | None = None) -> Object:
        """One object (a copy); 404 NotFound if absent."""
        resource_type = self.resolve(resource)
        return self.present(
            resource_type, self.get_stored(resource_type, name, self.namespace_for(resource_type, namespace))
        )

    def list(
        self, resource: str, namespace: str | None = None, *, label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[Object], str]:
        """Matching objects (copies, ordered by namespace then name) and the list's resourceVersion.

        ``namespace=None`` lists across all namespaces.
        """
        items, resource_version, _ = self.list_page(
            resource, namespace, label_selector=label_selector, field_selector=field_selector
        )
        return items, resource_version

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
        """One page of :meth:`list`: the matching objects after ``(namespace, name)`` ``after``, at most
        ``limit`` of them (0: all), copies of those only; plus the list's resourceVersion and how many
        matching objects follow the page. A page costs a copy of its own objects, not of the whole list."""
        resource_type = self.resolve(resource)
        selected = self._selected(resource_type, namespace, label_selector, field_selector)
        if after is not None:
            selected = [
                obj for obj in selected if (obj["metadata"].get("namespace", ""), obj["metadata"]["name"]) > after
            ]
        remaining = max(0, len(selected) - limit) if limit > 0 else 0
        page = selected[:limit] if limit > 0 else selected
        return [self.present(resource_type, obj) for obj in page], self.resource_version, remaining

    def _selected(
        self, resource_type: ResourceType, namespace: str | None, label_selector: str, field_selector: str
    ) -> builtins.list[Object]:
        """The stored objects (shared) matching the namespace and selectors, by (namespace, name)."""
        key = resource_type.storage_key
        matches = object_matcher(label_selector, field_selector, key)
        index = self._indexes.get(key)
        if index is None:
            return []
        candidates = index.candidates(
            self._objects.get(key, {}),
            namespace if namespace and resource_type.namespaced else None,
            parse_field_selector(field_selector, key),
            parse_label_selector(label_selector),
        )
        return [obj for obj in candidates if matches(obj)]

    def view(self, resource: str, namespace: str | None = None) -> builtins.list[Object]:
        """The stored objects of ``resource`` as :meth:`list` orders them, shared and never copied.

        For in-process readers (the simulated controllers) that only read: the objects are the
        stored ones, which the store never mutates (each commit stores a new object), so a view is
        a consistent snapshot of the objects as of the call; a reader that mutates one corrupts the
        store. A resource read at another version than its storage version is converted, so it is
        copied, as :meth:`list` does.
        """
        resource_type = self.resolve(resource)
        if resource_type.key != resource_type.storage_resource_key:
            return self.list(resource, namespace)[0]
        return self._selected(resource_type, namespace, "", "")

    def iter_objects(self, storage_key: str) -> Iterator[Object]:
        """The stored objects of one storage key, shared (read-only: do not mutate)."""
        return iter(list(self._objects.get(storage_key, {}).values()))

    # ----------------------------------------------------------------- committing

    def subscribe(self, callback: Subscriber, *, shared: bool = False) -> Callable[[], None]:
        """Call ``callback(event_type, resource_key, obj_copy)`` after every committed change, in order.

        ``resource_key`` uses the storage version. With ``shared`` the callback gets the stored
        object itself, not a copy (read-only, as :meth:`view`). A callback returning an awaitable
        is scheduled as a task. Returns a function that unsubscribes.
        """
        if shared:
            self._shared_subscribers.add(callback)
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)
            self._shared_subscribers.discard(callback)

        return unsubscribe

    def commit(self, resource_type: ResourceType, event_type: str, new: Object, old: Object | None) -> Object:
        """Store ``new`` (``ADDED``/``MODIFIED``) or remove it (``DELETED``) under the next resourceVersion,
        then publish the change to watches and subscribers; returns ``new``, now stored (do not mutate it).

        No admission: the caller hands an object it admitted, built as a new dict (``old`` is the
        stored object it replaces, or None). A subscriber that raises is logged, the commit stands.
        """
        self._resource_version += 1
        new["metadata"]["resourceVersion"] = str(self._resource_version)
        metadata = new["metadata"]
        identity = (metadata.get("namespace") or "", metadata["name"])
        bucket = self._objects.setdefault(resource_type.storage_key, {})
        index = self._indexes.setdefault(resource_type.storage_key, ObjectIndex())
        previous = bucket.get(identity)
        if event_type == "DELETED":
            bucket.pop(identity, None)
            index.remove(identity, previous)
        else:
            bucket[identity] = new
            index.put(identity, new, previous)
        self.owners.record((resource_type.storage_key, *identity), old, new, event_type)
        self._hub.publish(Event(self._resource_version, resource_type.storage_key, event_type, new, old))
        for callback in list(self._subscribers):
            try:
                delivered = new if callback in self._shared_subscribers else json_copy(new)
                result = callback(event_type, resource_type.storage_resource_key, delivered)
            except Exception:  # a broken subscriber must not undo or fail a committed write
                _log.exception("store subscriber %r failed on %s %s", callback, event_type, resource_type.key)
                continue
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._background.add(task)
                task.add_done_callback(self._background.discard)
        return new

    def generate_name(self, prefix: str) -> str:
        """``prefix`` plus five random characters of upstream's alphabet (``generateName``)."""
        return prefix + "".join(self._random.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))

    def new_uid(self) -> str:
        """A fresh ``metadata.uid`` (reproducible with ``seed``)."""
        return str(uuid.UUID(int=self._random.getrandbits(128), version=4)) if self._seeded else str(uuid.uuid4())

    def drop_storage(self, storage_key: str) -> None:
        """Forget the objects and indexes of ``storage_key`` without events (a removed CRD's resources,
        once their DELETED events are committed)."""
        self._objects.pop(storage_key, None)
        self._indexes.pop(storage_key, None)

    def type_of(self, storage_key: str) -> ResourceType:
        """The first served version of ``storage_key``; 404 when none is served."""
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
        current = (
            ()
            if resource_version not in (None, "", "0")
            else self._selected(resource_type, namespace, label_selector, field_selector)
        )
        name = selected_name(parse_field_selector(field_selector, resource_type.storage_key))
        return self._hub.open(resource_type.storage_key, namespace, matches, resource_version, current, name)

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
                yield delivery.type, self.present(resource_type, delivery.obj)
        finally:
            self.close_watch(stream)

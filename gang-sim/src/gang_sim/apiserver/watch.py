"""Committed change events, the kept event history, and watch streams.

Every committed write produces one :class:`Event` with the new global resourceVersion. Events are
kept in a bounded history (like etcd before compaction); a watch that starts from a resourceVersion
older than the oldest kept event gets 410 Expired, as from a real apiserver.

Selector semantics follow the watch cache (``storage/cacher``): an object that starts matching the
watch's selectors is delivered as ADDED, one that stops matching as DELETED (carrying the previous
state with the new resourceVersion), and events that match neither before nor after are skipped.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gang_sim.apiserver import errors

ObjectPredicate = Callable[[Mapping[str, Any]], bool]


@dataclass
class Event:
    """One committed change. ``obj`` and ``old`` are shared and must not be mutated."""

    resource_version: int
    storage_key: str
    type: str  # ADDED | MODIFIED | DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None
    _encoded: dict[tuple[str, str], bytes] = field(default_factory=dict, repr=False)

    def namespace(self) -> str:
        return str((self.obj.get("metadata") or {}).get("namespace") or "")

    def encoded(self, event_type: str, api_version: str, use_old: bool = False) -> bytes:
        """The watch line ``{"type": ..., "object": ...}\\n``, serialised once per form and shared."""
        cache_key = (event_type + ("-old" if use_old else ""), api_version)
        cached = self._encoded.get(cache_key)
        if cached is None:
            source = self.old if use_old and self.old is not None else self.obj
            body = dict(source, apiVersion=api_version)
            if use_old:
                body["metadata"] = dict(body.get("metadata") or {}, resourceVersion=str(self.resource_version))
            cached = (json.dumps({"type": event_type, "object": body}, separators=(",", ":")) + "\n").encode()
            self._encoded[cache_key] = cached
        return cached


@dataclass(frozen=True)
class Delivery:
    """What one watcher receives for one event: the event type as seen through its selectors."""

    type: str
    event: Event
    use_old: bool = False

    @property
    def obj(self) -> dict[str, Any]:
        if self.use_old and self.event.old is not None:
            old = dict(self.event.old)
            old["metadata"] = dict(old.get("metadata") or {}, resourceVersion=str(self.event.resource_version))
            return old
        return self.event.obj


class WatchStream:
    """One open watch: a queue of deliveries filled by the store, drained by the consumer."""

    def __init__(
        self, storage_key: str, namespace: str | None, matches: ObjectPredicate, name: str | None = None
    ) -> None:
        self.storage_key = storage_key
        self.namespace = namespace or None
        self.matches = matches
        self.name = name
        """The one object name the watch's ``metadata.name`` field selector allows, if it has one."""
        self.queue: asyncio.Queue[Delivery | None] = asyncio.Queue()
        self.closed = False

    def offer(self, event: Event) -> None:
        """Queue ``event`` if it concerns this watch (after namespace and selector filtering)."""
        if self.closed:
            return
        if self.namespace is not None and event.namespace() != self.namespace:
            return
        now_matches = event.type != "DELETED" and self.matches(event.obj)
        if event.type == "DELETED":
            if self.matches(event.obj):
                self.queue.put_nowait(Delivery("DELETED", event))
            return
        was_matching = event.old is not None and self.matches(event.old)
        if now_matches:
            self.queue.put_nowait(Delivery("MODIFIED" if was_matching else "ADDED", event))
        elif was_matching:
            self.queue.put_nowait(Delivery("DELETED", event, use_old=True))

    def close(self) -> None:
        """End the stream; a consumer blocked on the queue wakes up and stops."""
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


class History:
    """The bounded list of recent events, for resuming watches from a resourceVersion."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._events: deque[Event] = deque()
        self.compacted_through = 0  # every event with resourceVersion <= this is forgotten

    def append(self, event: Event) -> None:
        self._events.append(event)
        while len(self._events) > self.limit:
            self.compacted_through = self._events.popleft().resource_version

    def compact(self, through: int) -> None:
        """Forget every event up to ``through`` (watches from older versions get 410)."""
        while self._events and self._events[0].resource_version <= through:
            self._events.popleft()
        self.compacted_through = max(self.compacted_through, through)

    def since(self, resource_version: int, storage_key: str) -> list[Event]:
        """Events after ``resource_version`` for one storage key; 410 Expired if already compacted."""
        if resource_version < self.compacted_through:
            raise errors.expired(f"too old resource version: {resource_version} ({self.compacted_through + 1})")
        return [e for e in self._events if e.resource_version > resource_version and e.storage_key == storage_key]


class WatchHub:
    """The open watches per (storage key, namespace) and the event history they resume from.

    An event is offered only to the watches of its storage key that are cluster-wide or in its
    namespace, and that watch every name or its object's name (the watch cache's namespace and
    field indexes), so an event does not visit every watch.
    """

    def __init__(self, history_limit: int) -> None:
        self.history = History(history_limit)
        self._streams: dict[tuple[str, str | None, str | None], set[WatchStream]] = {}

    def publish(self, event: Event) -> None:
        """Record a committed event and offer it to the watches it may concern."""
        self.history.append(event)
        name = str((event.obj.get("metadata") or {}).get("name", ""))
        for namespace in (None, event.namespace()):
            for named in (None, name):
                for stream in list(self._streams.get((event.storage_key, namespace, named), ())):
                    stream.offer(event)

    def open(
        self,
        storage_key: str,
        namespace: str | None,
        matches: ObjectPredicate,
        resource_version: str | None,
        current: Iterable[dict[str, Any]],
        name: str | None = None,
    ) -> WatchStream:
        """A registered stream, primed with synthetic ADDED events for ``current`` objects (no
        ``resource_version``, ``""`` or ``"0"``) or with the history after ``resource_version``."""
        stream = WatchStream(storage_key, namespace, matches, name)
        if not resource_version or resource_version == "0":
            for obj in sorted(current, key=lambda o: int(o["metadata"]["resourceVersion"])):
                stream.offer(Event(int(obj["metadata"]["resourceVersion"]), storage_key, "ADDED", obj, None))
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {resource_version!r}") from None
            for event in self.history.since(since, storage_key):
                stream.offer(event)
        self._streams.setdefault(self._key(stream), set()).add(stream)
        return stream

    def close(self, stream: WatchStream) -> None:
        stream.close()
        key = self._key(stream)
        streams = self._streams.get(key)
        if streams is not None:
            streams.discard(stream)
            if not streams:
                del self._streams[key]

    @staticmethod
    def _key(stream: WatchStream) -> tuple[str, str | None, str | None]:
        return (stream.storage_key, stream.namespace, stream.name)

    def close_all(self) -> None:
        for streams in self._streams.values():
            for stream in list(streams):
                stream.close()
        self._streams.clear()

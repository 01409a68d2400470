"""One watch shared by the gangs of a process, and each gang's :class:`Subscription` to it.

A :class:`SharedWatch` is one :class:`~.watch.Reflector` (one LIST + WATCH of one kind in one
namespace, with a scope label selector) filling one cache, and the subscriptions whose selectors it
serves: every change is applied at once to the views it concerns (:class:`~.subscriber_index.SubscriberIndex`
finds them), each subscriber only *notified*. The process's registry of these watches, which creates,
shares and stops them, is :mod:`.watch_registry`; its docstring states the contracts both keep.

**Tombstones.** A view holds the latest state only, so a subscriber that joins after an object was
deleted could not tell it from one never created (an empty view either way). The watch therefore
keeps, for each object it saw deleted (a ``DELETED`` event, or gone from a relist after 410), a
:class:`Tombstone`: its last cached state and when the watch saw it go - for
:data:`TOMBSTONE_SECONDS` and at most :data:`TOMBSTONE_LIMIT` of them (the oldest dropped first),
as client-go's ``DeletedFinalStateUnknown`` hands a late informer handler the last known state.
An object created again under the name buries its tombstone. :meth:`Subscription.deleted` gives a
subscriber the tombstones its selectors match, whenever it joined. Past the bounds, or for an object
deleted before the watch's first LIST, deleted and never-seen read the same: the bounds say how
late a subscriber may join and still tell them apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import Resource
from airflow_provider_gang.kube.selectors import Selector
from airflow_provider_gang.kube.subscriber_index import SubscriberIndex
from airflow_provider_gang.kube.watch import Changed, Listed, Objects, Reflector

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_SECONDS = 10.0
"""Longest wait for a stopped watch's task or a closed client's sessions to finish."""

TOMBSTONE_SECONDS = 900.0
"""How long (the reflector's monotonic clock) a deleted object's tombstone is kept."""
TOMBSTONE_LIMIT = 4096
"""Most tombstones one watch keeps: deletions beyond it drop the oldest."""

Connect = Callable[[], Awaitable[KubeClient]]
Transform = Callable[[dict[str, Any]], dict[str, Any]]
OnRetry = Callable[["Subscription", errors.KubeError, float], None]


@dataclass(frozen=True)
class Tombstone:
    """An object the watch saw deleted: ``last`` is its last cached state (read-only, as the views'
    objects), ``deleted_at`` the reflector's ``monotonic()`` when the watch saw it go."""

    name: str
    last: Mapping[str, Any]
    deleted_at: float


class Subscription:
    """One subscriber's view of one shared watch.

    ``view``: name -> object of the matching objects (the cache's own dicts: read, never modify);
    ``version``: 0 until the watch has listed, then incremented whenever ``view`` changes;
    ``error``: set when the watch has ended with an error (the view then stays as it was).

    Slotted: a process holds one per waiting gang and kind, and an instance ``__dict__`` of these
    twelve attributes would cost several hundred bytes more each.
    """

    __slots__ = (
        "_notify",
        "_on_retry",
        "error",
        "field_selector",
        "joined_at",
        "label_selector",
        "reflector",
        "resource",
        "selector",
        "version",
        "view",
        "watch",
    )

    def __init__(
        self,
        watch: SharedWatch,
        selector: Selector,
        label_selector: str,
        field_selector: str,
        *,
        on_retry: OnRetry | None,
        notify: Callable[[], None],
    ) -> None:
        self.watch, self.selector = watch, selector
        self.reflector: Reflector = watch.reflector
        self.resource: Resource = watch.reflector.resource
        self.label_selector, self.field_selector = label_selector, field_selector
        self.view: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.error: BaseException | None = None
        self.joined_at = watch.reflector.monotonic()
        self._on_retry, self._notify = on_retry, notify

    @property
    def client(self) -> KubeClient:
        """The client the watch shares with every watch of its connection (closed when the last one stops)."""
        return self.reflector.client

    def snapshot(self) -> Objects:
        """A copy of the view (the objects themselves are shared)."""
        return dict(self.view)

    def deleted(self) -> dict[str, Tombstone]:
        """name -> :class:`Tombstone` of the objects this subscriber's selectors matched when they were
        deleted, kept by the watch (module docstring: bounded in time and number), whether the
        deletion came before or after this subscriber joined. A name absent from both :attr:`view`
        and this was never seen (or is past the bounds)."""
        return self.watch.tombstones_for(self.selector)

    def failing_for(self) -> float:
        """Seconds the server has failed this subscriber: since it joined or the first failure, whichever
        is later; 0 while it answers."""
        since = self.reflector.failing_since
        return 0.0 if since is None else self.reflector.monotonic() - max(since, self.joined_at)

    async def read_now(self) -> Objects:
        """A fresh LIST with this subscriber's own selectors, through the shared client (its retries
        and timeouts), not touching the cache; :class:`errors.KubeError` if the server does not answer."""
        items, _ = await self.client.list(
            self.resource,
            self.reflector.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        return {str((item.get("metadata") or {}).get("name", "")): item for item in items}

    def _moved(self) -> None:
        self.version += 1
        self._call(self._notify)

    def _retried(self, error: errors.KubeError, delay: float) -> None:
        if self._on_retry is not None:
            self._call(self._on_retry, self, error, delay)

    def _call(self, callback: Callable[..., None], *arguments: Any) -> None:
        try:
            callback(*arguments)
        except Exception:  # a subscriber's callback must not stop the watch every subscriber shares
            log.exception("subscriber callback %r raised; other subscribers are unaffected", callback)


class SharedWatch:
    """One reflector and its subscribers (built by :class:`SharedWatches`)."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        namespace: str,
        *,
        label_selector: str,
        field_selector: str,
        watch_timeout_seconds: int,
        transform: Transform | None,
        on_failed: Callable[[SharedWatch], None],
    ) -> None:
        self.reflector = Reflector(
            client,
            resource,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            watch_timeout_seconds=watch_timeout_seconds,
            on_retry=self.on_retry,
            transform=transform,
        )
        self.subscribers: set[Subscription] = set()
        self.listed = False
        self.tombstones: OrderedDict[str, Tombstone] = OrderedDict()
        """name -> :class:`Tombstone`, oldest first (module docstring)."""
        self._index: SubscriberIndex[Subscription] = SubscriberIndex()
        self._on_failed = on_failed
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"shared watch {self.reflector.resource.key}")

    def add(self, subscription: Subscription) -> None:
        self.subscribers.add(subscription)
        self._index.add(subscription)
        equality = subscription.selector.equality()
        if equality is not None and equality[0] not in self._index.label_keys:
            self._index.label_keys.add(equality[0])
            if self.listed:
                self._index.reindex(self.reflector.objects)
        if self.listed:
            self._fill(subscription)

    def remove(self, subscription: Subscription) -> None:
        self.subscribers.discard(subscription)
        self._index.remove(subscription)

    def on_retry(self, _: Reflector, error: errors.KubeError, delay: float) -> None:
        for subscription in list(self.subscribers):
            subscription._retried(error, delay)

    def _fill(self, subscription: Subscription) -> None:
        """Give a subscriber the matching objects of the cache (first LIST, or joining later)."""
        objects, selector = self.reflector.objects, subscription.selector
        if selector.name is not None:
            names: Any = (selector.name,)
        elif (equality := selector.equality()) is not None:
            names = self._index.names(equality)
        else:
            names = objects
        subscription.view = {
            name: objects[name] for name in names if name in objects and selector.matches(objects[name])
        }
        subscription._moved()

    def tombstones_for(self, selector: Selector) -> dict[str, Tombstone]:
        """The kept tombstones whose last state ``selector`` matches (expired ones dropped first)."""
        self._bury(self.reflector.monotonic())
        if selector.name is not None:
            found = self.tombstones.get(selector.name)
            candidates: tuple[Tombstone, ...] = () if found is None else (found,)
        else:
            candidates = tuple(self.tombstones.values())
        return {stone.name: stone for stone in candidates if selector.matches(stone.last)}

    def _bury(self, now: float) -> None:
        """Drop the tombstones older than :data:`TOMBSTONE_SECONDS` and those beyond :data:`TOMBSTONE_LIMIT`."""
        while self.tombstones:
            oldest = next(iter(self.tombstones.values()))
            if now - oldest.deleted_at < TOMBSTONE_SECONDS and len(self.tombstones) <= TOMBSTONE_LIMIT:
                return
            self.tombstones.popitem(last=False)

    def _apply(self, name: str, old: Mapping[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None and old is not None:
            now = self.reflector.monotonic()
            self.tombstones.pop(name, None)
            self.tombstones[name] = Tombstone(name, old, now)
            self._bury(now)
        elif new is not None:
            self.tombstones.pop(name, None)
        self._index.track(name, old, new)
        for subscription in self._index.candidates(name, old, new):
            if new is not None and subscription.selector.matches(new):
                if subscription.view.get(name) is new:
                    continue
                subscription.view[name] = new
            elif subscription.view.pop(name, None) is None:
                continue
            subscription._moved()

    def _relisted(self, previous: Objects) -> None:
        current = self.reflector.objects
        if not self.listed:
            self.listed = True
            self._index.reindex(current)
            for subscription in list(self.subscribers):
                self._fill(subscription)
            return
        self._index.reindex(previous)
        for name in set(previous) | set(current):
            old, new = previous.get(name), current.get(name)
            if _version(old) != _version(new) or (old is None) != (new is None):
                self._apply(name, old, new)

    async def _run(self) -> None:
        try:
            async with contextlib.aclosing(self.reflector.changes()) as changes:
                async for change in changes:
                    if isinstance(change, Listed):
                        self._relisted(change.previous)
                    elif isinstance(change, Changed):
                        self._apply(change.name, change.old, change.new)
        except Exception as error:  # handed to every subscriber, which raises it in its own task
            self._on_failed(self)
            for subscription in list(self.subscribers):
                subscription.error = error
                subscription._call(subscription._notify)

    async def stop(self) -> None:
        """Cancel the watch's task and wait for it (at most :data:`CLOSE_TIMEOUT_SECONDS`). A
        cancellation of the caller itself still propagates: only the watch task's own end is
        absorbed (``asyncio.wait`` neither raises it nor swallows the caller's ``CancelledError``)."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.wait({self.task}, timeout=CLOSE_TIMEOUT_SECONDS)
            if self.task.done() and not self.task.cancelled():
                self.task.exception()  # retrieved: its failure was dispatched to the subscribers


def _version(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))

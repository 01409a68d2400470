"""Watches shared by every gang waiting in one process: one client and one watch per
(connection, namespace, kind), each subscriber handed the objects its own selectors match.

The pattern is client-go's shared informer (``tools/cache/shared_informer.go``): one
:class:`~.watch.Reflector` fills one cache per kind. A *subscriber* is one gang's interest (a
ProvisioningRequest by name, a Workload or member pods by label selector); its *view* is the cached
objects its selectors match. ``docs/shared-watches.md`` explains the design; the contracts:

- **One watch per key**: connection (:func:`connection_key`), namespace, kind, watch length and a
  *scope* label selector every subscriber's selector implies (:meth:`.selectors.Selector.scope`); a
  selector :mod:`.selectors` cannot evaluate gets a watch with exactly its own selectors. The
  watches of one connection share one :class:`~.client.KubeClient`.
- **Never an empty view before the first LIST**: ``version`` stays 0 until the watch has listed; a
  later joiner gets the matching cached objects at once, without a request.
- **No event lost or reordered; latest state, not every state**: each change (a watch event, or an
  object a relist after 410 found added, changed or gone) is applied to the views it concerns at
  once, in the watch's order; the subscriber is only *notified* and reads its view when it runs. A
  slow subscriber holds no queue and stalls no one; it never reads a state older than one it read,
  but may skip intermediate ones - right for ``decide``, a function of the current objects.
- **Failures shared, budgets not**: retries go to every ``on_retry``; :meth:`Subscription.failing_for`
  counts from the later of the first failure and the joining. An error the reflector raises ends the
  watch for every subscriber (:attr:`Subscription.error`) and frees its key at once.
- **No subscriber breaks the others**: callbacks run guarded, its code in its own task. The last
  subscriber leaving stops the watch; the last watch of a connection closes the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import Resource
from airflow_provider_gang.kube.selectors import Selector, Unsupported
from airflow_provider_gang.kube.watch import Changed, Listed, Objects, Reflector

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_SECONDS = 10.0
"""Longest wait for a stopped watch's task or a closed client's sessions to finish."""

Connect = Callable[[], Awaitable[KubeClient]]
Transform = Callable[[dict[str, Any]], dict[str, Any]]
OnRetry = Callable[["Subscription", errors.KubeError, float], None]


def connection_key(*parts: Mapping[str, Any]) -> str:
    """A digest of plain-value connection settings and client options: equal digests share a client.
    A digest, so credentials in the settings are not kept as dictionary keys."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class Subscription:
    """One subscriber's view of one shared watch.

    ``view``: name -> object of the matching objects (the cache's own dicts: read, never modify);
    ``version``: 0 until the watch has listed, then incremented whenever ``view`` changes;
    ``error``: set when the watch has ended with an error (the view then stays as it was).
    """

    def __init__(self, watch: SharedWatch, selector: Selector, label_selector: str, field_selector: str,
                 *, on_retry: OnRetry | None, notify: Callable[[], None]) -> None:
        self.watch, self.selector = watch, selector
        self.reflector: Reflector = watch.reflector
        self.resource: Resource = watch.reflector.resource
        self.label_selector, self.field_selector = label_selector, field_selector
        self.view: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.error: BaseException | None = None
        self.joined_at = watch.reflector.monotonic()
        self._on_retry, self._notify = on_retry, notify

    def snapshot(self) -> Objects:
        """A copy of the view (the objects themselves are shared)."""
        return dict(self.view)

    def failing_for(self) -> float:
        """Seconds the server has failed this subscriber: since it joined or the first failure, whichever
        is later; 0 while it answers."""
        since = self.reflector.failing_since
        return 0.0 if since is None else self.reflector.monotonic() - max(since, self.joined_at)

    async def read_now(self) -> Objects:
        """A fresh LIST with this subscriber's own selectors, through the shared client (its retries
        and timeouts), not touching the cache; :class:`errors.KubeError` if the server does not answer."""
        items, _ = await self.reflector.client.list(self.resource, self.reflector.namespace,
                                                    label_selector=self.label_selector,
                                                    field_selector=self.field_selector)
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


@dataclass(eq=False)
class _Index:
    """Subscribers by what they select, and the cache's object names by label, for the keys
    subscribers select on - so a change reaches its subscribers without looking at the others."""

    by_name: dict[str, set[Subscription]] = field(default_factory=dict)
    by_label: dict[tuple[str, str], set[Subscription]] = field(default_factory=dict)
    unindexed: set[Subscription] = field(default_factory=set)
    names_by_label: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    label_keys: set[str] = field(default_factory=set)

    def bucket(self, subscription: Subscription) -> set[Subscription]:
        selector = subscription.selector
        if selector.name is not None:
            return self.by_name.setdefault(selector.name, set())
        equality = selector.equality()
        return self.unindexed if equality is None else self.by_label.setdefault(equality, set())

    def candidates(self, name: str, *objects: Mapping[str, Any] | None) -> set[Subscription]:
        found = set(self.by_name.get(name, ())) | self.unindexed
        for obj in objects:
            for pair in _labels(obj).items():
                found |= self.by_label.get(pair, set())
        return found

    def track(self, name: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        for pair in _labels(old).items():
            if pair[0] in self.label_keys:
                self.names_by_label.get(pair, set()).discard(name)
        for pair in _labels(new).items():
            if pair[0] in self.label_keys:
                self.names_by_label.setdefault(pair, set()).add(name)

    def reindex(self, objects: Mapping[str, Mapping[str, Any]]) -> None:
        self.names_by_label = {}
        for name, obj in objects.items():
            self.track(name, None, obj)


class SharedWatch:
    """One reflector and its subscribers (built by :class:`SharedWatches`)."""

    def __init__(self, client: KubeClient, resource: Resource, namespace: str, *, label_selector: str,
                 field_selector: str, watch_timeout_seconds: int, transform: Transform | None,
                 on_failed: Callable[[SharedWatch], None]) -> None:
        self.reflector = Reflector(client, resource, namespace, label_selector=label_selector,
                                   field_selector=field_selector, watch_timeout_seconds=watch_timeout_seconds,
                                   on_retry=self.on_retry, transform=transform)
        self.subscribers: set[Subscription] = set()
        self.listed = False
        self._index = _Index()
        self._on_failed = on_failed
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"shared watch {self.reflector.resource.key}")

    def add(self, subscription: Subscription) -> None:
        self.subscribers.add(subscription)
        self._index.bucket(subscription).add(subscription)
        equality = subscription.selector.equality()
        if equality is not None and equality[0] not in self._index.label_keys:
            self._index.label_keys.add(equality[0])
            if self.listed:
                self._index.reindex(self.reflector.objects)
        if self.listed:
            self._fill(subscription)

    def remove(self, subscription: Subscription) -> None:
        self.subscribers.discard(subscription)
        self._index.bucket(subscription).discard(subscription)

    def on_retry(self, _: Reflector, error: errors.KubeError, delay: float) -> None:
        for subscription in list(self.subscribers):
            subscription._retried(error, delay)

    def _fill(self, subscription: Subscription) -> None:
        """Give a subscriber the matching objects of the cache (first LIST, or joining later)."""
        objects, selector = self.reflector.objects, subscription.selector
        if selector.name is not None:
            names: Any = (selector.name,)
        elif (equality := selector.equality()) is not None:
            names = self._index.names_by_label.get(equality, ())
        else:
            names = objects
        subscription.view = {
            name: objects[name] for name in names if name in objects and selector.matches(objects[name])
        }
        subscription._moved()

    def _apply(self, name: str, old: Mapping[str, Any] | None, new: dict[str, Any] | None) -> None:
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
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(self.task, CLOSE_TIMEOUT_SECONDS)


@dataclass(eq=False)
class _SharedClient:
    client: asyncio.Future[KubeClient]
    watches: int = 0

    def built(self) -> KubeClient | None:
        ready = self.client.done() and not self.client.cancelled() and self.client.exception() is None
        return self.client.result() if ready else None


WatchKey = tuple[str, str, str, str, str, int, Transform | None]


class SharedWatches:
    """The shared watches and clients of one event loop (:func:`for_running_loop`)."""

    def __init__(self) -> None:
        self._clients: dict[str, _SharedClient] = {}
        self._watches: dict[WatchKey, SharedWatch] = {}
        self._client_of: dict[SharedWatch, str] = {}

    @property
    def watches(self) -> list[SharedWatch]:
        return list(self._watches.values())

    @property
    def clients(self) -> list[KubeClient]:
        return [client for shared in self._clients.values() if (client := shared.built()) is not None]

    async def subscribe(self, *, connection: str, connect: Connect, resource: Resource, namespace: str,
                        label_selector: str = "", field_selector: str = "", watch_timeout_seconds: int = 300,
                        on_retry: OnRetry | None = None, notify: Callable[[], None],
                        transform: Transform | None = None) -> Subscription:
        """Join (or start) the watch of ``resource`` in ``namespace`` over ``connection``'s client
        (built with ``connect`` if this process has none yet); ``notify`` is called whenever the
        returned subscription's view changes or its watch fails; ``transform`` is the reflector's
        (part of the key: pass one function object, not a new one each time). Leave with
        :meth:`unsubscribe`."""
        try:
            selector = Selector.parse(label_selector, field_selector)
            scope, exact = selector.scope(), ""
        except Unsupported:
            selector, scope, exact = Selector(), label_selector, field_selector
        key: WatchKey = (connection, namespace, resource.key, scope, exact, int(watch_timeout_seconds), transform)
        watch = self._watches.get(key)
        if watch is None:
            client = await self._acquire(connection, connect)
            watch = self._watches.get(key)  # another subscriber may have started it meanwhile
            if watch is None:
                watch = SharedWatch(client, resource, namespace, label_selector=scope, field_selector=exact,
                                    watch_timeout_seconds=watch_timeout_seconds, transform=transform,
                                    on_failed=self._evict)
                self._watches[key], self._client_of[watch] = watch, connection
                watch.start()
            else:
                await self._release(connection)
        subscription = Subscription(watch, selector, label_selector, field_selector, on_retry=on_retry, notify=notify)
        watch.add(subscription)
        return subscription

    async def unsubscribe(self, subscription: Subscription) -> None:
        """Leave; the last subscriber of a watch stops it, the last watch of a client closes it.
        Idempotent."""
        watch = subscription.watch
        if subscription not in watch.subscribers:
            return
        watch.remove(subscription)
        if watch.subscribers:
            return
        self._evict(watch)
        connection = self._client_of.pop(watch, None)
        await watch.stop()
        if connection is not None:
            await self._release(connection)

    def _evict(self, watch: SharedWatch) -> None:
        for key, known in list(self._watches.items()):
            if known is watch:
                del self._watches[key]

    async def _acquire(self, connection: str, connect: Connect) -> KubeClient:
        shared = self._clients.get(connection)
        if shared is None:
            shared = self._clients[connection] = _SharedClient(asyncio.ensure_future(connect()))
        shared.watches += 1
        try:
            return await asyncio.shield(shared.client)
        except BaseException:
            await self._release(connection)
            raise

    async def _release(self, connection: str) -> None:
        shared = self._clients.get(connection)
        if shared is None:
            return
        shared.watches -= 1
        if shared.watches > 0:
            return
        del self._clients[connection]
        client = shared.built()
        if client is None:
            shared.client.cancel()  # still connecting (a failed or cancelled future ignores it)
        else:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(client.close(), CLOSE_TIMEOUT_SECONDS)


_REGISTRIES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SharedWatches] = weakref.WeakKeyDictionary()


def for_running_loop() -> SharedWatches:
    """The registry of the running event loop: every trigger of one triggerer runs on one loop."""
    loop = asyncio.get_running_loop()
    registry = _REGISTRIES.get(loop)
    if registry is None:
        registry = _REGISTRIES[loop] = SharedWatches()
    return registry


async def together(subscriptions: Sequence[Subscription], wakeup: asyncio.Event
                   ) -> AsyncGenerator[dict[str, Objects], None]:
    """``{resource key: view}`` of several subscriptions whenever one moved on, once all are ready (a
    kind never reads as empty because its LIST has not answered). ``wakeup`` is the event every one
    of them was given as ``notify`` (``wakeup.set``). Raises the first watch error."""
    seen = [0] * len(subscriptions)
    while True:
        wakeup.clear()
        for subscription in subscriptions:
            if subscription.error is not None:
                raise subscription.error
        versions = [subscription.version for subscription in subscriptions]
        if all(versions) and versions != seen:
            seen = versions
            yield {subscription.resource.key: subscription.snapshot() for subscription in subscriptions}
            continue
        await wakeup.wait()


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _version(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))


"""Watches shared by every gang waiting in one process: one client and one watch per
(connection, namespace, kind), each subscriber handed the objects its own selectors match.

The pattern is client-go's shared informer (``tools/cache/shared_informer.go``): one
:class:`~.watch.Reflector` fills one cache per kind. A *subscriber* is one gang's interest (a
ProvisioningRequest by name, a Workload or member pods by label selector); its *view* is the cached
objects its selectors match. This module is the process's registry of the watches (which key shares
which watch and which client; :mod:`.shared_watch` is one watch and its subscriptions).
``docs/shared-watches.md`` explains the design; the contracts:

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
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import Resource
from airflow_provider_gang.kube.selectors import Selector, Unsupported
from airflow_provider_gang.kube.shared_watch import (
    CLOSE_TIMEOUT_SECONDS,
    Connect,
    OnRetry,
    SharedWatch,
    Subscription,
    Transform,
)
from airflow_provider_gang.kube.watch import Objects


def connection_key(*parts: Mapping[str, Any]) -> str:
    """A digest of plain-value connection settings and client options: equal digests share a client.
    A digest, so credentials in the settings are not kept as dictionary keys."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


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

    async def subscribe(
        self,
        *,
        connection: str,
        connect: Connect,
        resource: Resource,
        namespace: str,
        label_selector: str = "",
        field_selector: str = "",
        watch_timeout_seconds: int = 300,
        on_retry: OnRetry | None = None,
        notify: Callable[[], None],
        transform: Transform | None = None,
    ) -> Subscription:
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
                watch = SharedWatch(
                    client,
                    resource,
                    namespace,
                    label_selector=scope,
                    field_selector=exact,
                    watch_timeout_seconds=watch_timeout_seconds,
                    transform=transform,
                    on_failed=self._evict,
                )
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
        try:
            await watch.stop()
        finally:  # also when the caller is cancelled meanwhile: the client is closed all the same
            if connection is not None:
                await self._release(connection)

    async def unsubscribe_all(self, subscriptions: list[Subscription]) -> None:
        """:meth:`unsubscribe` every one of ``subscriptions``, emptying the list - all of them even if
        the caller is cancelled meanwhile, the cancellation raised once they are left."""
        cancelled: asyncio.CancelledError | None = None
        while subscriptions:
            try:
                await self.unsubscribe(subscriptions.pop())
            except asyncio.CancelledError as error:
                cancelled = error
        if cancelled is not None:
            raise cancelled

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


class Wakeup:
    """What a subscriber's ``notify`` sets and its one reader awaits: :class:`asyncio.Event`'s
    ``set``/``clear``/``wait`` for a single waiter, without the Event's queue of waiters (a
    ``collections.deque`` of about 600 bytes, per waiting gang), and with a timeout of its own: one
    future and one timer handle, where ``asyncio.wait_for`` or ``asyncio.wait`` would build a task,
    two sets and a callback per wait (about 2 KB held by every waiting gang)."""

    __slots__ = ("_is_set", "_waiter")

    def __init__(self) -> None:
        self._is_set = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._is_set = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def clear(self) -> None:
        self._is_set = False

    def is_set(self) -> bool:
        return self._is_set

    async def wait(self, timeout: float | None = None) -> bool:
        """Until set, or at most ``timeout`` seconds of the loop's clock (``None``: no limit); whether
        it is set. A cancelled wait leaves no timer behind."""
        if self._is_set:
            return True
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(max(0.0, timeout), _expire, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return self._is_set


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class LatestViews:
    """The views of several subscriptions, taken when one moved on and all are ready: what
    :func:`together` yields, read without a task or a generator of its own (one per waiting gang)."""

    __slots__ = ("_seen", "_subscriptions", "_wakeup")

    def __init__(self, subscriptions: Sequence[Subscription], wakeup: Wakeup | asyncio.Event) -> None:
        self._subscriptions = tuple(subscriptions)
        self._wakeup = wakeup
        self._seen = (0,) * len(self._subscriptions)

    def take(self) -> dict[str, Objects] | None:
        """``{resource key: view}`` if a subscription moved on since the last take and every one has
        listed (a kind never reads as empty because its LIST has not answered), else ``None``; clears
        ``wakeup`` first, so a change after this sets it again. Raises the first watch error."""
        self._wakeup.clear()
        for subscription in self._subscriptions:
            if subscription.error is not None:
                raise subscription.error
        versions = tuple(subscription.version for subscription in self._subscriptions)
        if not all(versions) or versions == self._seen:
            return None
        self._seen = versions
        return {subscription.resource.key: subscription.snapshot() for subscription in self._subscriptions}


_REGISTRIES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SharedWatches] = weakref.WeakKeyDictionary()


def for_running_loop() -> SharedWatches:
    """The registry of the running event loop: every trigger of one triggerer runs on one loop."""
    loop = asyncio.get_running_loop()
    registry = _REGISTRIES.get(loop)
    if registry is None:
        registry = _REGISTRIES[loop] = SharedWatches()
    return registry


async def together(
    subscriptions: Sequence[Subscription], wakeup: Wakeup | asyncio.Event
) -> AsyncGenerator[dict[str, Objects], None]:
    """``{resource key: view}`` of several subscriptions whenever one moved on, once all are ready
    (:meth:`LatestViews.take`). ``wakeup`` is the event every one of them was given as ``notify``
    (``wakeup.set``). Raises the first watch error."""
    latest = LatestViews(subscriptions, wakeup)
    while True:
        view = latest.take()
        if view is not None:
            yield view
            continue
        await wakeup.wait()

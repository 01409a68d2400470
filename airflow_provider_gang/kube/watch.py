"""List-then-watch with resume, bookmarks, relist on 410 and reconnects.

:class:`Reflector` follows client-go's ``Reflector.ListAndWatch`` (``tools/cache/reflector.go``): one
LIST gives the current objects and a resourceVersion; one long WATCH from that resourceVersion streams
changes. The watch is re-opened from the *last seen* resourceVersion (bookmarks included) when the server
ends it (``timeoutSeconds``), when the stream is cut, or when no byte arrives within ``read_timeout``
(a half-open socket). Only a ``410 Gone`` - the server's history no longer reaches that resourceVersion
(API concepts, "Efficient detection of changes") - forces a new LIST. The first LIST after a 410 is
immediate; a 410 to the watch opened from that LIST's own resourceVersion means the server cannot
watch from anything it lists, and each further relist waits for the client's backoff, as client-go's
reflector waits for its backoff manager between ``ListAndWatch`` calls - without it a server that
answers 410 to every watch gets a LIST and a WATCH per round trip for as long as the wait lasts. A
relist that finds the objects changed ends that backoff: events happened that the watch could not
deliver, so the next ones are listed without delay. A caller that is about to decide because time
passed (a deadline) reads the objects afresh with :meth:`Reflector.read_now`, since the cache may be as
old as one backoff.

So a quiet wait costs one LIST plus one WATCH per ``watch_timeout_seconds`` per kind, whatever the
number of objects or their changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient, Sleep
from airflow_provider_gang.kube.resources import Resource

Objects = Mapping[str, dict[str, Any]]
LIST_PAGE_SIZE = 100
"""Objects per page of the reflector's LISTs: each page is transformed before the next is read, so
a page of whole objects (a pod is ~17 KB decoded) is the LIST's transient memory; client-go's pager
reads 500, which for pods costs ~8 MB at once."""
#: A watch the server ends sooner than this without any event counts as a failure (backoff).
MIN_QUIET_WATCH_SECONDS = 1.0


@dataclass(frozen=True)
class Listed:
    """A LIST (re)filled the cache; ``previous`` is what the cache held before it (empty the first time)."""

    previous: Objects


@dataclass(frozen=True)
class Changed:
    """One watch event changed the cache: the object named ``name`` before (``old``) and after (``new``);
    ``None`` where it is absent (``ADDED``: no ``old``, ``DELETED``: no ``new``). ``final``: the object a
    ``DELETED`` event carried, its last state on the server (newer than ``old`` when an update's event
    never reached this cache)."""

    name: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    final: dict[str, Any] | None = None


Change: TypeAlias = Listed | Changed


@dataclass
class ReflectorStats:
    """Request counters of one reflector (for logs and the API-cost benchmark)."""

    lists: int = 0
    watches: int = 0
    relists: int = 0
    reconnects: int = 0
    bookmarks: int = 0


class Reflector:
    """Keep an up-to-date cache of the objects of one kind that match a selector.

    Args:
        client: the trigger's client.
        resource: kind to watch.
        namespace: namespace (ignored for cluster-scoped kinds); defaults to the client's.
        label_selector, field_selector: which objects to follow.
        watch_timeout_seconds: ``timeoutSeconds`` asked of the server for each WATCH.
        read_timeout: longest silence tolerated on an open watch; defaults to
            ``watch_timeout_seconds + 30`` (bookmarks arrive about every minute on a real server).
        sleep: awaited between reconnect attempts after errors (inject a fake in tests).
        monotonic: clock that measures how long each watch lasted and how long the server has
            been failing.
        on_retry: called as ``on_retry(reflector, error, delay)`` before each wait for a retry after
            a retryable error (for the caller's log); :attr:`failing_since` says since when the
            server has not answered.
        transform: applied to every object before it is cached (client-go's informer
            ``SetTransform``): a cache shared by many subscribers keeps only the fields they read.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        watch_timeout_seconds: int = 300,
        read_timeout: float | None = None,
        sleep: Sleep | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        on_retry: Callable[[Reflector, errors.KubeError, float], None] | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace or client.namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_seconds = watch_timeout_seconds
        self.read_timeout = read_timeout if read_timeout is not None else watch_timeout_seconds + 30.0
        self.objects: dict[str, dict[str, Any]] = {}
        self.resource_version = ""
        self.stats = ReflectorStats()
        self._sleep = sleep or asyncio.sleep
        self._monotonic = monotonic
        self._on_retry = on_retry
        self._transform = transform
        self.failing_since: float | None = None
        """``monotonic()`` of the first of the retryable failures since the server last answered."""
        self.last_error: errors.KubeError | None = None

    def monotonic(self) -> float:
        """The reflector's clock (``monotonic`` argument) now."""
        return self._monotonic()

    def failing_for(self) -> float:
        """Seconds the server has failed to answer this reflector without a success in between."""
        return 0.0 if self.failing_since is None else self._monotonic() - self.failing_since

    async def _retry_after_failure(self, error: errors.KubeError, failures: int) -> None:
        """Note the failure, tell ``on_retry``, wait the client's backoff (``Retry-After`` honoured)."""
        if self.failing_since is None:
            self.failing_since = self._monotonic()
        self.last_error = error
        retry_after = error.retry_after if isinstance(error, errors.Unavailable) else None
        delay = self.client.retry.delay(failures, retry_after)
        if self._on_retry is not None:
            self._on_retry(self, error, delay)
        await self._sleep(delay)

    def _answered(self) -> None:
        self.failing_since, self.last_error = None, None

    async def snapshots(self) -> AsyncIterator[Objects]:
        """Yield the cached objects (name -> object) after the first LIST and after every change.

        Runs until the caller stops iterating; errors as :meth:`changes`.
        """
        async with contextlib.aclosing(self.changes()) as changes:
            async for _ in changes:
                yield dict(self.objects)

    async def changes(self) -> AsyncGenerator[Change, None]:
        """Yield :class:`Listed` after the first LIST and every relist, :class:`Changed` after every
        watch event that changed the cache; :attr:`objects` is already updated when a change is yielded.

        Runs until the caller stops iterating. Retryable errors (429/5xx, cuts, timeouts) are retried
        forever with the client's backoff - waiting is the caller's job and it bounds it with its own
        deadline; any other :class:`errors.KubeError` (Forbidden, NotFound of the kind...) is raised.
        """
        await self._relist_until_done()
        yield Listed({})
        failures = 0
        expired_in_a_row = 0  # 410s with no event and no watch ended by the server in between
        unauthorized_retried = False
        while True:
            opened_at = self._monotonic()
            delivered = False
            try:
                async with contextlib.aclosing(self._watch_once()) as events:
                    async for change in events:
                        failures, delivered, unauthorized_retried = 0, True, False
                        self._answered()
                        if change is not None:
                            yield change
                expired_in_a_row = 0
                if delivered or self._monotonic() - opened_at >= MIN_QUIET_WATCH_SECONDS:
                    self._answered()  # a watch the server ended on time is an answer too
                if not delivered and self._monotonic() - opened_at < MIN_QUIET_WATCH_SECONDS:
                    # Ended at once with nothing: a proxy or a sick server. Back off, do not spin.
                    failures += 1
                    await self._sleep(self.client.retry.delay(failures))
            except errors.Gone:
                self.stats.relists += 1
                expired_in_a_row = 1 if delivered else expired_in_a_row + 1
                if expired_in_a_row > 1:
                    await self._sleep(self.client.retry.delay(expired_in_a_row - 1))
                before = self.objects
                await self._relist_until_done()
                if _versions(self.objects) != _versions(before):
                    expired_in_a_row = 0  # the LIST found changes the watch missed: events happened
                yield Listed(before)
                continue
            except errors.Unauthorized:
                # The client reloaded credentials (a new exec-plugin token); one more try with them.
                if unauthorized_retried:
                    raise
                unauthorized_retried = True
            except errors.KubeError as error:
                if not error.retryable:
                    raise
                failures += 1
                await self._retry_after_failure(error, failures)
            self.stats.reconnects += 1

    async def read_now(self) -> Objects:
        """One fresh LIST (the client's retries and timeouts), name -> object, without touching the
        cache: for a caller about to decide on time passing, whose cached view may be as old as the
        backoff between relists. Raises :class:`errors.KubeError` when the server does not answer."""
        items, _ = await self.client.list(
            self.resource, self.namespace, label_selector=self.label_selector, field_selector=self.field_selector
        )
        return {_name(item): item for item in items}

    async def _relist_until_done(self) -> None:
        failures = 0
        while True:
            try:
                items, resource_version = await self.client.list(
                    self.resource,
                    self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    page_size=LIST_PAGE_SIZE,
                    transform=self._transform,
                )
            except errors.KubeError as error:
                if not error.retryable:
                    raise
                failures += 1
                await self._retry_after_failure(error, failures)
                continue
            self._answered()
            self.stats.lists += 1
            self.objects = {_name(item): item for item in items}  # transformed page by page
            self.resource_version = resource_version
            return

    async def _watch_once(self) -> AsyncGenerator[Changed | None, None]:
        """One WATCH request; yields each event's change to the cache (``None``: none). Ends when the
        server does."""
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_timeout_seconds),
            "resourceVersion": self.resource_version,
        }
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        if self.field_selector:
            params["fieldSelector"] = self.field_selector
        self.stats.watches += 1
        path = self.resource.path(self.namespace if self.resource.namespaced else None)
        async with self.client.open_stream(path, params, read_timeout=self.read_timeout) as stream:
            async for line in stream:
                if not line.strip():
                    continue
                yield self._apply(_parse_event(line))

    def _apply(self, event: dict[str, Any]) -> Changed | None:
        event_type = event.get("type")
        obj = event.get("object") or {}
        if event_type == "ERROR":
            raise errors.from_status(int(obj.get("code") or 500), obj)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)
        if event_type == "BOOKMARK":
            self.stats.bookmarks += 1
            return None
        name = _name(obj)
        if self._transform is not None:
            obj = self._transform(obj)
        if event_type == "DELETED":
            return Changed(name, self.objects.pop(name, None), None, final=obj)
        if event_type in ("ADDED", "MODIFIED"):
            old, self.objects[name] = self.objects.get(name), obj
            return Changed(name, old, obj)
        return None


def _versions(objects: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {name: str(obj.get("metadata", {}).get("resourceVersion", "")) for name, obj in objects.items()}


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _parse_event(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise errors.TransportError(f"watch stream sent a line that is not JSON: {line[:200]!r}") from error
    if not isinstance(event, dict):
        raise errors.TransportError(f"watch stream sent a non-object event: {line[:200]!r}")
    return event

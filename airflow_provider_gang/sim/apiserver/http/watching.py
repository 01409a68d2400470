"""Watch streams over HTTP: newline-delimited JSON events, flushed per batch.

Semantics of a real apiserver (``apiserver/pkg/endpoints/handlers/watch.go``):

- ``resourceVersion`` unset/``""``/``"0"``: synthetic ADDED events for current objects, then changes;
  ``N``: every change after N; N older than the kept history: HTTP 200 with one ``ERROR`` event
  carrying a 410 Expired ``Status``, then the stream ends (clients relist);
- ``timeoutSeconds`` ends the stream (default 30 minutes); the ``watch-cut`` fault ends it earlier;
- faults (:mod:`.faults`): ``watch-expire`` answers a resuming watch like a too old resourceVersion;
  ``reset`` sends the pending events, then aborts the connection (no chunked end); ``malformed``
  alters every event object, or (``truncated-watch``) cuts the first line in half and ends the stream;
- ``allowWatchBookmarks=true``: periodic ``BOOKMARK`` events with the newest resourceVersion;
- watch-list (KEP-3157, on by default since Kubernetes 1.34): ``sendInitialEvents=true`` (which needs
  ``resourceVersionMatch=NotOlderThan``) sends the current objects as ADDED, then, with bookmarks
  allowed, one ``BOOKMARK`` annotated ``k8s.io/initial-events-end: "true"``; a watch from no
  resourceVersion (or ``"0"``) is defaulted to it (``apimachinery`` ``internalversion/defaults.go``
  ``SetListOptionsDefaults``); ``sendInitialEvents=false`` starts at the newest version without them;
  ``resourceVersionMatch`` without ``sendInitialEvents`` is 422 (``internalversion/validation``);
- ``/{plural}/{name}?watch`` (legacy form) watches one object (``metadata.name`` field selector).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Final

from aiohttp import web

from airflow_provider_gang.sim.apiserver import errors
from airflow_provider_gang.sim.apiserver.http import malformed, requestlog, tables
from airflow_provider_gang.sim.apiserver.http.context import ApiContext
from airflow_provider_gang.sim.apiserver.http.paths import RequestInfo, parse_bool
from airflow_provider_gang.sim.apiserver.registry import ResourceType
from airflow_provider_gang.sim.apiserver.watch import Delivery, Event, WatchStream

INITIAL_EVENTS_END: Final = "k8s.io/initial-events-end"
"""The annotation of the bookmark that ends a watch-list's initial events (``metav1.InitialEventsAnnotationKey``)."""


def _line(event_type: str, obj: object) -> bytes:
    return (json.dumps({"type": event_type, "object": obj}, separators=(",", ":")) + "\n").encode()


class _Encoder:
    """Watch lines as JSON objects, or as one-row Tables (headers in the first only) for kubectl.

    ``malformed``: an object-altering kind of :mod:`.malformed` applied to every event object.
    """

    def __init__(self, resource_type: ResourceType, as_table: bool, malformed_kind: str | None = None) -> None:
        self.resource_type, self.as_table, self.headers_sent = resource_type, as_table, False
        self.malformed_kind = malformed_kind

    def __call__(self, delivery: Delivery) -> bytes:
        if delivery.type == "BOOKMARK":
            return _line("BOOKMARK", delivery.event.obj)
        if self.malformed_kind is not None:
            body = dict(delivery.obj, apiVersion=self.resource_type.api_version)
            return _line(delivery.type, malformed.apply(self.malformed_kind, body))
        if not self.as_table:
            return delivery.event.encoded(delivery.type, self.resource_type.api_version, delivery.use_old)
        obj = delivery.obj
        rendered = tables.table(
            self.resource_type, [obj], obj["metadata"]["resourceVersion"], headers=not self.headers_sent
        )
        self.headers_sent = True
        return _line(delivery.type, rendered)


async def serve(
    request: web.Request, context: ApiContext, info: RequestInfo, resource_type: ResourceType
) -> web.StreamResponse:
    """Stream watch events for one request until timeout, cut, close or client disconnect."""
    query = request.query
    resource_version, initial_events = _watch_start(query, context)
    field_selector = query.get("fieldSelector", "")
    if info.name:
        field_selector = ",".join(filter(None, [field_selector, f"metadata.name={info.name}"]))
    try:
        requested = float(query.get("timeoutSeconds") or 0)
    except ValueError:
        raise errors.bad_request(f"timeoutSeconds: invalid value {query.get('timeoutSeconds')!r}") from None
    timeout = requested if requested > 0 else context.default_watch_timeout_seconds
    if context.faults.watch_cut_seconds is not None:
        timeout = min(timeout, context.faults.watch_cut_seconds)
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    drawn = requestlog.injected(request)  # a fault the middleware drew (``reset``) excludes the others
    try:
        if drawn is None and context.faults.draw_watch_expiry(info, resource_version):
            requestlog.mark(request, "watch-expire")
            raise errors.expired(f"too old resource version: {resource_version} ({context.store.resource_version})")
        stream = context.store.open_watch(
            info.resource_key,
            info.namespace,
            resource_version=resource_version,
            label_selector=query.get("labelSelector", ""),
            field_selector=field_selector,
        )
    except errors.ApiError as error:
        if error.code != 410:
            raise
        await response.prepare(request)
        await response.write(_line("ERROR", error.to_status()))
        await _end(request, response, abort=drawn == "reset")
        return response
    as_table = tables.wants_table(request.headers.get("Accept", ""))
    kind = None if as_table else requestlog.malformed_for(request, context.faults, info)
    encode = _Encoder(resource_type, as_table, kind if kind in malformed.OBJECT_KINDS else None)
    loop = asyncio.get_running_loop()
    timers = [loop.call_later(timeout, stream.close)]

    def send_bookmark(annotations: dict[str, str] | None = None) -> None:
        metadata: dict[str, object] = {"resourceVersion": context.store.resource_version}
        if annotations:
            metadata["annotations"] = annotations
        marker = {"kind": resource_type.kind, "apiVersion": resource_type.api_version, "metadata": metadata}
        stream.queue.put_nowait(Delivery("BOOKMARK", Event(0, stream.storage_key, "BOOKMARK", marker, None)))

    def bookmark() -> None:
        if not stream.closed:
            send_bookmark()
            timers.append(loop.call_later(context.bookmark_interval_seconds, bookmark))

    if parse_bool(query.get("allowWatchBookmarks")):
        if initial_events:  # the initial ADDED events are queued already
            send_bookmark({INITIAL_EVENTS_END: "true"})
        timers.append(loop.call_later(context.bookmark_interval_seconds, bookmark))
    try:
        await response.prepare(request)
        ended = False
        while not ended:
            if drawn == "reset":  # what is pending now, then the abort below
                chunks, ended = _pending(stream, encode)[0], True
            else:
                delivery = await stream.queue.get()
                if delivery is None:
                    break
                chunks, ended = _pending(stream, encode)
                chunks.insert(0, encode(delivery))
            if kind == malformed.TRUNCATED_WATCH and chunks:
                await response.write(malformed.truncate(chunks[0]))
                break
            await response.write(b"".join(chunks))
        await _end(request, response, abort=drawn == "reset")
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        for timer in timers:
            timer.cancel()
        context.store.close_watch(stream)
    return response


def _watch_start(query: Mapping[str, str], context: ApiContext) -> tuple[str | None, bool]:
    """The resourceVersion to open the store's watch at and whether it starts with the current objects,
    from ``resourceVersion``, ``sendInitialEvents`` and ``resourceVersionMatch`` (see the module docstring)."""
    resource_version = query.get("resourceVersion")
    match = query.get("resourceVersionMatch", "")
    if "sendInitialEvents" not in query:
        if match:
            raise _forbidden_list_option(
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
            )
        return resource_version, resource_version in (None, "", "0")
    if match != "NotOlderThan":
        raise _forbidden_list_option("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
    if parse_bool(query.get("sendInitialEvents")):
        return None, True  # the current state is not older than any version the client has seen
    return (resource_version if resource_version not in (None, "", "0") else context.store.resource_version), False


def _forbidden_list_option(detail: str) -> errors.ApiError:
    cause = errors.field_cause("FieldValueForbidden", "resourceVersionMatch", f"Forbidden: {detail}")
    return errors.invalid("ListOptions", "", [cause], group="meta.k8s.io")


def _pending(stream: WatchStream, encode: _Encoder) -> tuple[list[bytes], bool]:
    """The encoded deliveries queued now (without waiting), and whether the stream's end was among them."""
    chunks: list[bytes] = []
    while not stream.queue.empty():
        delivery = stream.queue.get_nowait()
        if delivery is None:
            return chunks, True
        chunks.append(encode(delivery))
    return chunks, False


async def _end(request: web.Request, response: web.StreamResponse, *, abort: bool) -> None:
    """End the stream cleanly (last chunk), or abort the connection (the ``reset`` fault)."""
    if not abort:
        await response.write_eof()
    elif request.transport is not None:
        request.transport.abort()

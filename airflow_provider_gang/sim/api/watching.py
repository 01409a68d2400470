"""Watch streams over HTTP: newline-delimited JSON events, flushed per batch.

Semantics of a real apiserver (``apiserver/pkg/endpoints/handlers/watch.go``):

- ``resourceVersion`` unset/``""``/``"0"``: synthetic ADDED events for current objects, then changes;
  ``N``: every change after N; N older than the kept history: HTTP 200 with one ``ERROR`` event
  carrying a 410 Expired ``Status``, then the stream ends (clients relist);
- ``timeoutSeconds`` ends the stream (default 30 minutes); the ``watch-cut`` fault ends it earlier;
- ``allowWatchBookmarks=true``: periodic ``BOOKMARK`` events with the newest resourceVersion;
- ``/{plural}/{name}?watch`` (legacy form) watches one object (``metadata.name`` field selector);
- ``sendInitialEvents=true`` is answered 422, so kubectl's ``wait`` falls back to list+watch.
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from airflow_provider_gang.sim import errors
from airflow_provider_gang.sim.api import tables
from airflow_provider_gang.sim.api.context import ApiContext
from airflow_provider_gang.sim.api.paths import RequestInfo, parse_bool
from airflow_provider_gang.sim.registry import ResourceType
from airflow_provider_gang.sim.watch import Delivery, Event


def _line(event_type: str, obj: object) -> bytes:
    return (json.dumps({"type": event_type, "object": obj}, separators=(",", ":")) + "\n").encode()


class _Encoder:
    """Watch lines as JSON objects, or as one-row Tables (headers in the first only) for kubectl."""

    def __init__(self, resource_type: ResourceType, as_table: bool) -> None:
        self.resource_type, self.as_table, self.headers_sent = resource_type, as_table, False

    def __call__(self, delivery: Delivery) -> bytes:
        if delivery.type == "BOOKMARK":
            return _line("BOOKMARK", delivery.event.obj)
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
    if parse_bool(query.get("sendInitialEvents")):
        raise errors.invalid(
            "ListOptions",
            "",
            [
                errors.field_cause(
                    "FieldValueForbidden",
                    "sendInitialEvents",
                    "Forbidden: sendInitialEvents is not supported by this server",
                )
            ],
        )
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
    try:
        stream = context.store.open_watch(
            info.resource_key,
            info.namespace,
            resource_version=query.get("resourceVersion"),
            label_selector=query.get("labelSelector", ""),
            field_selector=field_selector,
        )
    except errors.ApiError as error:
        if error.code != 410:
            raise
        await response.prepare(request)
        await response.write(_line("ERROR", error.to_status()))
        await response.write_eof()
        return response
    encode = _Encoder(resource_type, tables.wants_table(request.headers.get("Accept", "")))
    loop = asyncio.get_running_loop()
    timers = [loop.call_later(timeout, stream.close)]

    def bookmark() -> None:
        marker = {
            "kind": resource_type.kind,
            "apiVersion": resource_type.api_version,
            "metadata": {"resourceVersion": context.store.resource_version},
        }
        if not stream.closed:
            stream.queue.put_nowait(Delivery("BOOKMARK", Event(0, stream.storage_key, "BOOKMARK", marker, None)))
            timers.append(loop.call_later(context.bookmark_interval_seconds, bookmark))

    if parse_bool(query.get("allowWatchBookmarks")):
        timers.append(loop.call_later(context.bookmark_interval_seconds, bookmark))
    try:
        await response.prepare(request)
        while True:
            delivery = await stream.queue.get()
            if delivery is None:
                break
            chunks = [encode(delivery)]
            ended = False
            while not stream.queue.empty():
                more = stream.queue.get_nowait()
                if more is None:
                    ended = True
                    break
                chunks.append(encode(more))
            await response.write(b"".join(chunks))
            if ended:
                break
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        for timer in timers:
            timer.cancel()
        context.store.close_watch(stream)
    return response

"""The ordered log of Kubernetes API requests, read at ``GET /_sim/requests`` (``DELETE`` reads and clears).

A reliability suite enumerates the calls of a clean run from it, then injects a fault into each one
(see :mod:`.faults`). One entry per resource request that passed authentication, in arrival order
(discovery, OpenAPI, ``/version`` and ``/_sim/`` requests are not logged)::

    {"verb": "patch",                 # the RBAC verb (get list watch create update patch delete deletecollection)
     "resource": "autoscaling.x-k8s.io/provisioningrequests",   # "<group>/<plural>", core kinds just "<plural>"
     "subresource": "status",         # or null
     "namespace": "default",          # or null (cluster-scoped, or all namespaces)
     "name": "gang-1",                # or null (list, watch of a collection, create)
     "code": 200,                     # HTTP status sent; null while unanswered and for a dropped connection
     "injected": null}                # the fault that shaped the answer (see Entry.injected), or null

``resource`` and ``subresource`` are written as a fault item's resource field takes them, so
``f"{verb}/{resource}" + (f"/{subresource}" if subresource else "")`` targets exactly that call.
The log keeps the newest :data:`DEFAULT_LIMIT` entries.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gang_sim.apiserver.http.faults import Faults
from gang_sim.apiserver.http.paths import RequestInfo

DEFAULT_LIMIT = 100_000


@dataclass
class Entry:
    """One logged request. ``code`` is set when its headers are sent; ``injected`` by the fault that
    decided the answer: ``error`` (an injected error status), ``reset``, ``drop``, ``watch-expire`` or
    ``malformed:<kind>``."""

    verb: str
    resource: str
    subresource: str | None
    namespace: str | None
    name: str | None
    code: int | None = None
    injected: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "verb": self.verb,
            "resource": self.resource,
            "subresource": self.subresource,
            "namespace": self.namespace,
            "name": self.name,
            "code": self.code,
            "injected": self.injected,
        }


class RequestLog:
    """The newest ``limit`` entries, oldest first."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._entries: deque[Entry] = deque(maxlen=limit)

    def record(self, info: RequestInfo) -> Entry:
        resource = f"{info.group}/{info.plural}" if info.group else info.plural
        entry = Entry(info.verb, resource, info.subresource, info.namespace, info.name)
        self._entries.append(entry)
        return entry

    def snapshot(self) -> list[dict[str, Any]]:
        return [entry.to_json() for entry in self._entries]

    def clear(self) -> None:
        self._entries.clear()


#: The entry of the request being served (set by the API middleware).
ENTRY = web.RequestKey("gang_sim_request_entry", Entry)


def injected(request: web.Request) -> str | None:
    """The fault already drawn for this request (by the middleware), if any."""
    entry = request.get(ENTRY)
    return None if entry is None else entry.injected


def mark(request: web.Request, kind: str) -> None:
    """Record that the fault ``kind`` shapes this request's answer."""
    entry = request.get(ENTRY)
    if entry is not None:
        entry.injected = kind


def malformed_for(request: web.Request, faults: Faults, info: RequestInfo) -> str | None:
    """The malformed-answer kind for this GET/LIST/WATCH (logged), unless another fault shapes it."""
    if injected(request) is not None:
        return None
    kind = faults.draw_malformed(info)
    if kind is not None:
        mark(request, f"malformed:{kind}")
    return kind


async def on_response_prepare(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare`` signal handler: the status is logged once headers go out (streams too);
    not for a connection the ``drop`` fault has aborted."""
    entry = request.get(ENTRY)
    transport = request.transport
    if entry is not None and transport is not None and not transport.is_closing():
        entry.code = response.status

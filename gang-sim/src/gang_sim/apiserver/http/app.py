"""The aiohttp application: Kubernetes API paths, discovery, OpenAPI and ``/_sim/`` control endpoints.

Request pipeline for ``/api``, ``/apis`` and ``/openapi``: bearer-token authentication (401), request
counting and logging, RBAC-like authorization (403), injected faults (latency; errors, resets and
drops of :mod:`.faults`, on discovery GETs too), then the handler (which applies watch-expire and
malformed-answer faults).
Every :class:`~gang_sim.apiserver.errors.ApiError` becomes a ``Status`` response.
``/version`` and ``/healthz``/``/readyz``/``/livez`` need no token (anonymous access upstream).

Control endpoints (no token, loopback only): ``GET/PUT/DELETE /_sim/faults`` (JSON, see
:mod:`.faults`), ``GET /_sim/metrics`` and ``DELETE /_sim/metrics`` (reset), ``GET /_sim/requests``
and ``DELETE /_sim/requests`` (returns, then clears; see :mod:`.requestlog`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from gang_sim.apiserver import errors, warning_headers
from gang_sim.apiserver.http import discovery, objects, openapi, paths, requestlog
from gang_sim.apiserver.http.context import CONTEXT, ApiContext, json_response, status_response
from gang_sim.apiserver.http.faults import Faults, Injection

_log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_OPEN_PATHS = frozenset({"/version", "/version/", "/healthz", "/readyz", "/livez"})


def _context(request: web.Request) -> ApiContext:
    return request.app[CONTEXT]


@web.middleware
async def api_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Authentication, counting, authorization, faults and error rendering (see module docstring)."""
    if request.path.startswith("/_sim/") or request.path in _OPEN_PATHS:
        return await handler(request)
    context = _context(request)
    injection: Injection | None = None
    try:
        user = context.authorizer.user_for(request.headers.get("Authorization"))
        if user is None:
            raise errors.unauthorized()
        info = paths.parse(request.method, request.path, request.query)
        if info is not None:
            request[requestlog.ENTRY] = context.requests.record(info)
            context.metrics.count(info.verb, info.metric_resource)
            if not context.authorizer.allows(
                user, info.verb, info.group, info.rbac_resource, paths.authorized_name(info, request.query)
            ):
                raise errors.forbidden(user, info.verb, info.rbac_resource, info.group, info.namespace, info.name or "")
            faults = context.faults
            if faults.latency_seconds > 0:
                await asyncio.sleep(faults.latency_seconds)
            injection = faults.draw_error(info.verb, info)
        elif request.method == "GET" and request.path.startswith("/api"):  # /api, /apis: discovery documents
            injection = context.faults.draw_discovery_error(request.path)
        if injection is not None:
            requestlog.mark(request, injection.kind)
            if injection.kind == "drop":
                return _drop(request)
            if injection.error is not None:
                raise injection.error
        collected = warning_headers.collect()
        response = await handler(request)
        if collected and not response.prepared:
            for message in collected:
                response.headers.add("Warning", warning_headers.header_value(message))
    except errors.ApiError as error:
        response = status_response(error)
    except web.HTTPException:
        raise
    except Exception as error:  # an emulator bug: answer like apiserver's panic handler, keep serving
        _log.exception("unhandled error serving %s %s", request.method, request.path)
        response = status_response(errors.ApiError(500, "InternalError", f"Internal error occurred: {error!r}"))
    if injection is not None and injection.kind == "reset":
        response = await _reset(request, response)
    context.metrics.count_code(response.status)
    return response


def _drop(request: web.Request) -> web.StreamResponse:
    """The ``drop`` fault: abort the connection before anything is handled or answered."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=503)  # never sent: aiohttp finds the transport closed


async def _reset(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """The ``reset`` fault: send the status line, headers and half the body, then abort the connection.

    A response already streamed (``follow`` logs) only loses its clean chunked end; a watch has cut
    itself after its pending events (``watching.serve``), so this only makes sure of the abort.
    """
    cut = response
    try:
        if not response.prepared and isinstance(response, web.Response):
            body = bytes(response.body) if isinstance(response.body, (bytes, bytearray)) else b""
            cut = web.StreamResponse(status=response.status, reason=response.reason, headers=response.headers)
            cut.content_length = len(body)
            await cut.prepare(request)
            await cut.write(body[: len(body) // 2])
    except ConnectionError:
        pass
    if request.transport is not None:
        request.transport.abort()
    return cut


def _page_not_found() -> web.Response:
    """What the apiserver's mux answers for a group-version nobody serves (not a Status)."""
    return web.Response(status=404, text="404 page not found\n", content_type="text/plain")


async def _api(request: web.Request) -> web.StreamResponse:
    context = _context(request)
    registry = context.store.registry
    path = request.path.rstrip("/")
    if path == "/api":
        return json_response(discovery.api_versions(context.server_address))
    if path == "/apis":
        return json_response(discovery.api_group_list(registry))
    info = paths.parse(request.method, request.path, request.query)
    if info is None:
        located = paths.group_version_of(path)
        if located is None:
            group = path.split("/")[2] if path.count("/") >= 2 else ""
            document = discovery.api_group(registry, group)
        else:
            group, version, _ = located
            document = discovery.api_resource_list(registry, f"{group}/{version}" if group else version)
        if document is None:
            return _page_not_found()
        return json_response(document)
    served = registry.in_group_version(info.api_version)
    if not served or (all(t.custom for t in served) and registry.lookup(info.api_version, info.plural) is None):
        return _page_not_found()  # the CRD handler delegates unknown resources to the mux
    user = context.authorizer.user_for(request.headers.get("Authorization")) or ""
    return await objects.handle(request, context, info, user)


async def _version(request: web.Request) -> web.StreamResponse:
    return json_response(discovery.SERVER_VERSION)


async def _health(request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok", content_type="text/plain")


async def _openapi_v2(request: web.Request) -> web.StreamResponse:
    return web.Response(body=openapi.OPENAPI_V2_PROTOBUF, content_type="application/octet-stream")


async def _openapi_v3(request: web.Request) -> web.StreamResponse:
    registry = _context(request).store.registry
    tail = request.match_info.get("tail", "").strip("/")
    if not tail:
        return json_response(openapi.index(registry))
    segments = tail.split("/")
    api_version = "/".join(segments[1:]) if segments[0] in ("api", "apis") else ""
    if not api_version or not registry.in_group_version(api_version):
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    return json_response(openapi.document(registry, api_version))


async def _faults(request: web.Request) -> web.StreamResponse:
    context = _context(request)
    if request.method == "DELETE":
        context.faults = Faults(clock=context.fault_clock)
    elif request.method in ("PUT", "POST"):
        clock = context.fault_clock
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError('expected {"spec": "<spec>"} or the JSON of GET /_sim/faults')
            spec = body.get("spec")
            if spec is not None and not isinstance(spec, str):
                raise ValueError("spec must be a string")
            context.faults = Faults.from_json(body, clock=clock) if spec is None else Faults.parse(spec, clock=clock)
        except ValueError as error:
            return json_response(errors.bad_request(f"bad faults: {error}").to_status(), status=400)
    return json_response(context.faults.to_json())


async def _requests(request: web.Request) -> web.StreamResponse:
    context = _context(request)
    entries = context.requests.snapshot()
    if request.method == "DELETE":
        context.requests.clear()
    elif request.method != "GET":
        raise web.HTTPMethodNotAllowed(request.method, ["GET", "DELETE"])
    return json_response(entries)


async def _metrics(request: web.Request) -> web.StreamResponse:
    context = _context(request)
    snapshot = context.metrics.snapshot()
    if request.method == "DELETE":
        context.metrics.reset()
    return json_response(snapshot)


def build_app(context: ApiContext) -> web.Application:
    """The application; more ``/_sim/`` routes may be added before it starts."""
    app = web.Application(middlewares=[api_middleware], client_max_size=32 * 1024 * 1024)
    app[CONTEXT] = context
    app.on_response_prepare.append(requestlog.on_response_prepare)
    for pattern in ("/api", "/api/{tail:.*}", "/apis", "/apis/{tail:.*}"):
        app.router.add_route("*", pattern, _api)
    app.router.add_get("/version", _version)
    app.router.add_get("/version/", _version)  # what the generated clients' VersionApi requests
    for health in ("/healthz", "/readyz", "/livez"):
        app.router.add_get(health, _health)
    app.router.add_get("/openapi/v2", _openapi_v2)
    app.router.add_get("/openapi/v3", _openapi_v3)
    app.router.add_get("/openapi/v3/{tail:.*}", _openapi_v3)
    app.router.add_route("*", "/_sim/faults", _faults)
    app.router.add_route("*", "/_sim/metrics", _metrics)
    app.router.add_route("*", "/_sim/requests", _requests)
    return app

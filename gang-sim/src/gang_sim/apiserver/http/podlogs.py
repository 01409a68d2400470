"""``GET /api/v1/namespaces/{ns}/pods/{name}/log`` (``PodLogOptions``), served from ``store.logs``.

Answers like a kubelet behind the apiserver: ``text/plain``; ``container`` required when the pod has
several; unknown container 400; a Pending pod whose container never logged 400 "waiting to start";
``follow=true`` streams until the container's log is closed; ``tailLines``, ``sinceSeconds``,
``timestamps`` select and format lines. ``previous=true`` answers 400 as for a container that never
restarted (earlier runs are not kept).
"""

from __future__ import annotations

from aiohttp import web

from gang_sim.apiserver import errors
from gang_sim.apiserver.http.context import ApiContext
from gang_sim.apiserver.http.paths import RequestInfo, parse_bool


def _int_option(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f"{name}: invalid value {value!r}") from None


async def serve(request: web.Request, context: ApiContext, info: RequestInfo) -> web.StreamResponse:
    if request.method != "GET":
        raise errors.method_not_allowed("the server does not allow this method on the requested resource")
    namespace, name = info.namespace or "default", info.name or ""
    pod = context.store.get("v1/pods", name, namespace)
    spec = pod.get("spec") or {}
    names = [c["name"] for c in spec.get("containers") or []]
    all_names = names + [c["name"] for c in spec.get("initContainers") or []]
    container = request.query.get("container", "")
    if not container:
        if len(names) != 1:
            raise errors.bad_request(
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
            )
        container = names[0]
    if container not in all_names:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    if parse_bool(request.query.get("previous")):  # no restarts are kept: like a container that never restarted
        raise errors.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
    logs = context.store.logs
    if (pod.get("status") or {}).get("phase") == "Pending" and not logs.has_stream(namespace, name, container):
        raise errors.bad_request(f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating')
    tail_lines = _int_option(request.query.get("tailLines"), "tailLines")
    since = _int_option(request.query.get("sinceSeconds"), "sinceSeconds")
    timestamps = parse_bool(request.query.get("timestamps"))
    if not parse_bool(request.query.get("follow")):
        text = logs.read(namespace, name, container, tail_lines=tail_lines, since_seconds=since, timestamps=timestamps)
        return web.Response(text=text, content_type="text/plain")
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        async for chunk in logs.follow(
            namespace, name, container, tail_lines=tail_lines, since_seconds=since, timestamps=timestamps
        ):
            await response.write(chunk.encode())
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass
    return response

"""A fault-injecting HTTPS proxy in front of the real kube-apiserver, outside the code under test.

The provider reaches the apiserver through a kubeconfig pointing at this proxy (:attr:`FaultProxy.
kubeconfig_path`, its own Airflow connection); the proxy forwards each request with the admin client
certificate of the real cluster's kubeconfig and relays the answer as it streams (a watch's chunks
pass through as they come). :class:`Rule` s decide which requests fail instead:

- an HTTP status (``500``, ``503``...): answered with a ``v1 Status`` body, never forwarded (the
  apiserver's own overload answer, ``k8s.io/apimachinery/pkg/api/errors.NewServiceUnavailable``);
- ``"reset"``: forwarded, so the request takes effect; the answer is never relayed and the
  connection is aborted (the client sees a transport error for a create that did succeed);
- ``"drop"``: the connection is aborted before anything is forwarded (no effect).

Every request is logged as a :class:`Call` (verb, group, resource, name - for a create, from its
body - the gang labels of a created object, the status code and whether a rule answered it), which
the tests count: at most one successful create per object of a gang.

Verbs follow the apiserver's request-info resolution (``k8s.io/apiserver/pkg/endpoints/request/
requestinfo.go``): GET on a name is ``get``, on a collection ``list`` or, with ``watch=true``,
``watch``; POST ``create``; PUT ``update``; PATCH ``patch``; DELETE ``delete``/``deletecollection``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import yaml
from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

from airflow_provider_gang.reservation import naming
from gang_sim.apiserver.tls import CertificateAuthority
from gang_sim.testing.real.ports import PortReservations

ANY = "*"
MUTATING_VERBS = ("create", "update", "patch", "delete", "deletecollection")
READ_VERBS = ("get", "list", "watch")
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"})
_NOT_FORWARDED = _HOP_BY_HOP | {"authorization", "accept-encoding"}


@dataclass(frozen=True)
class Rule:
    """The first ``count`` requests matching ``verbs`` and ``resources`` (plurals, ``"*"`` for any)
    are answered ``answer`` (a status code, ``"reset"`` or ``"drop"``); with ``each_call`` the count
    is kept per distinct (verb, resource), so every kind of call fails ``count`` times."""

    verbs: tuple[str, ...]
    resources: tuple[str, ...]
    answer: int | str = 503
    count: int = 1
    each_call: bool = False

    def matches(self, call: Call) -> bool:
        verb_ok = ANY in self.verbs or call.verb in self.verbs
        return verb_ok and (ANY in self.resources or call.resource in self.resources)


@dataclass
class Call:
    """One request the proxy got, as the apiserver would classify it, and how it was answered."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    code: int = 0
    injected: str = ""
    at: float = field(default_factory=time.time)
    request_body: bytes = b""
    answer_body: bytes = b""
    """For a forwarded request the apiserver refused (4xx/5xx, not a watch): what was sent and answered."""

    @property
    def target(self) -> str:
        """``verb/resource[/subresource]``, as the emulator's fault items name a call."""
        return f"{self.verb}/{self.resource}" + (f"/{self.subresource}" if self.subresource else "")

    @property
    def gang(self) -> str:
        return self.labels.get(naming.GANG_LABEL, "")


def classify(method: str, path: str, watch: bool, body: bytes) -> Call:
    """The :class:`Call` of one request (``discovery`` for the paths outside any resource)."""
    parts = [part for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return Call("discovery", "", "", "", "", "")
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return Call("discovery", group, "", "", "", "")
    resource, name, subresource = rest[0], (rest[1:2] or [""])[0], "/".join(rest[2:])
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
    if method == "GET":
        verb = "get" if name else ("watch" if watch else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    labels: dict[str, str] = {}
    if verb == "create" and body:
        try:
            metadata = json.loads(body).get("metadata") or {}
        except (ValueError, AttributeError):
            metadata = {}
        name = name if subresource else str(metadata.get("name") or "")
        labels = {str(key): str(value) for key, value in (metadata.get("labels") or {}).items()}
    return Call(verb, group, resource, subresource, namespace, name, labels)


def _status_body(code: int, call: Call) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"injected by the fault proxy: {call.target}",
            "reason": "ServiceUnavailable" if code == 503 else "InternalError",
            "code": code,
        }
    ).encode()


class FaultProxy:
    """The proxy on ``127.0.0.1`` in a background thread with its own event loop.

    ``with FaultProxy(real_kubeconfig, directory) as proxy:``; :meth:`set_rules` replaces the rules
    (and their counts), :meth:`calls` is the log, ``on_answer(call)`` (optional) runs on the proxy's
    loop after the apiserver answered a forwarded request and before the answer is relayed.
    """

    def __init__(self, upstream_kubeconfig: Path, directory: Path) -> None:
        document = yaml.safe_load(upstream_kubeconfig.read_text())
        cluster, user = document["clusters"][0]["cluster"], document["users"][0]["user"]
        self.upstream = str(cluster["server"]).rstrip("/")
        directory.mkdir(parents=True, exist_ok=True)
        self._upstream_tls = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        certificate, key = directory / "admin.crt", directory / "admin.key"
        certificate.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        key.chmod(0o600)
        self._upstream_tls.load_cert_chain(certificate, key)
        authority = CertificateAuthority("gang-fault-proxy-ca")
        serving_certificate, serving_key = authority.serving("gang-fault-proxy").write(directory, "proxy")
        self._serving_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._serving_tls.load_cert_chain(serving_certificate, serving_key)
        self._ports = PortReservations()  # held until __exit__: no other server is handed it meanwhile
        self.port = self._ports.reserve()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig_path = directory / "proxy.kubeconfig"
        self.kubeconfig_path.write_text(self._kubeconfig(authority.certificate_pem))
        self.on_answer: Callable[[Call], None] | None = None
        self._rules: list[Rule] = []
        self._used: dict[tuple[int, str, str], int] = {}
        self._calls: list[Call] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None

    def _kubeconfig(self, ca_pem: bytes) -> str:
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "fault-proxy",
                        "cluster": {
                            "server": self.url,
                            "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                        },
                    }
                ],
                # The proxy authenticates upstream itself; this token only satisfies the client.
                "users": [{"name": "through-proxy", "user": {"token": "fault-proxy"}}],
                "contexts": [
                    {
                        "name": "fault-proxy",
                        "context": {"cluster": "fault-proxy", "user": "through-proxy", "namespace": "default"},
                    }
                ],
                "current-context": "fault-proxy",
            },
            sort_keys=False,
        )

    # -- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._ports.release()

    async def _start(self) -> None:
        self._session = ClientSession(
            connector=TCPConnector(ssl=self._upstream_tls, limit=0),
            timeout=ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=self._serving_tls).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    # -- rules and log -----------------------------------------------------------------------------

    def set_rules(self, rules: list[Rule]) -> None:
        """Replace the rules; every rule's count starts again."""
        with self._lock:
            self._rules, self._used = list(rules), {}

    def calls(self, *, clear: bool = False) -> list[Call]:
        """The requests so far, oldest first (``clear``: and forget them)."""
        with self._lock:
            calls = list(self._calls)
            if clear:
                self._calls.clear()
            return calls

    def _injected(self, call: Call) -> str | int | None:
        with self._lock:
            self._calls.append(call)
            for index, rule in enumerate(self._rules):
                if not rule.matches(call):
                    continue
                key = (index, call.verb, call.resource) if rule.each_call else (index, "", "")
                if self._used.get(key, 0) < rule.count:
                    self._used[key] = self._used.get(key, 0) + 1
                    call.injected = str(rule.answer)
                    return rule.answer
            return None

    # -- forwarding --------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        watch = request.query.get("watch", "") in ("1", "true")
        call = classify(request.method, request.path, watch, body)
        answer = self._injected(call)
        if isinstance(answer, int):
            call.code = answer
            return web.Response(status=answer, body=_status_body(answer, call), content_type="application/json")
        if answer == "drop":
            return self._abort(request)
        assert self._session is not None
        headers = {key: value for key, value in request.headers.items() if key.lower() not in _NOT_FORWARDED}
        async with self._session.request(
            request.method, f"{self.upstream}{request.rel_url}", headers=headers, data=body or None
        ) as upstream:
            call.code = upstream.status
            if answer == "reset":
                if not watch:
                    await upstream.read()
                return self._abort(request)
            if upstream.status >= 400 and not watch:
                call.request_body, call.answer_body = body, await upstream.read()
            if self.on_answer is not None:
                self.on_answer(call)
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP_BY_HOP:
                    response.headers.add(key, value)
            await response.prepare(request)
            try:
                if call.answer_body:
                    await response.write(call.answer_body)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionError:
                pass
            return response

    @staticmethod
    def _abort(request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=503)  # never sent: the transport is closed

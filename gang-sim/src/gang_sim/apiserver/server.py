"""The Kubernetes API emulator: an in-memory kube-apiserver over HTTPS on 127.0.0.1.

The official ``kubernetes`` and ``kubernetes_asyncio`` clients and ``kubectl`` use it unchanged
through the kubeconfig it writes (bearer token, self-signed CA). Follows the kube-apiserver's
documented behaviour (https://kubernetes.io/docs/reference/using-api/api-concepts/): discovery,
OpenAPI for ``kubectl apply``, CRUD with real status codes and ``Status`` errors,
Content-Type-dispatched PATCH, ``managedFields`` and server-side apply with field ownership, status
subresources, finalizers and garbage collection, watches with resume/bookmarks/410, CRD-schema
validation, pod logs, token auth with per-user rules, fault injection and request metrics.

Not modelled (differences from a real apiserver a test could notice):

- no scheduler, kubelet or controllers here (see ``gang_sim.controllers`` for the simulated ones): pods
  stay Pending; a deleted pod bound to a node stays Terminating (``deletionTimestamp``) until a
  delete with grace 0 - the kubelet's part, which only the simulated control plane plays - and an
  unbound or finished one is removed at once, as upstream (:func:`.garbage.plan_delete`);
- CEL ``x-kubernetes-validations``: no Kubernetes CEL library functions, no optional syntax, no cost
  budget (``sim.cel_expressions``, ``gang_sim.apiserver.kinds.cel_rules``); validating/mutating webhooks,
  CRD conversion webhooks (versions share storage, only ``apiVersion`` differs); CRD schema
  ``format`` checks;
- built-in kinds get only the validation this project relies on (names, labels, pod/job essentials,
  pod-update immutability), no full OpenAPI schema; ``fieldValidation`` (Strict: 400, Warn: a
  ``Warning`` header) only for custom resources;
- ``managedFields`` and server-side apply: the deviations listed in :mod:`.managed_fields` and
  :mod:`.server_side_apply` (built-in kinds' lists keyed only where :data:`.patches.MERGE_KEYS` names
  a merge key; ``".": {}`` membership of new object nodes approximated);
  the simulated controllers write as field manager ``gang-sim`` (not kubelet, kube-scheduler, kueue),
  and the garbage collector's and pod binding's writes record no entry;
- list ``resourceVersion``/``resourceVersionMatch`` are ignored
  (lists are always current); continue tokens never expire;
- watch-list serves the current objects, not a state "not older than" a given version; periodic
  bookmarks come every ``bookmark_interval_seconds`` whether or not the version moved; slow watchers are never
  dropped (each watch has an unbounded queue, where a real watch cache would close it); the watch
  cache's start is this server's start (older resourceVersions get 410 from the beginning);
- Go zero values a real server prints (``creationTimestamp: null`` in templates, ``source: {}`` in
  Events, empty ``nodeInfo``) are absent; JSON key order differs;
- feature gates: only ``TopologyAwareWorkloadScheduling`` (the PodGroup and Workload fields it guards,
  :mod:`.feature_gates`) and the Workload API as a whole (``serve_workload_api``); every other gate is
  as a v1.37 apiserver's default;
- admission plugins beyond DefaultTolerationSeconds (e.g. TaintNodesByCondition's ``not-ready``
  taint on new Nodes, ServiceAccount, LimitRanger, ResourceQuota, PodSecurity);
- protobuf request bodies other than SelfSubjectAccessReview, Namespace, ConfigMap and Secret get
  415 (so e.g. ``kubectl create job|deployment ...`` fail; ``apply``/``create -f`` send JSON and work);
  aggregated discovery; ``exec``/``attach``/``port-forward``;
  previous-container logs; RBAC objects (rules are configured on the server, not via the API);
  priority-and-fairness, admission quotas, LimitRanges, ServiceAccount tokens.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from aiohttp import web

from gang_sim.apiserver import kubeconfig, tls
from gang_sim.apiserver.crds import install_bundled_crds
from gang_sim.apiserver.feature_gates import enable as enable_feature_gates
from gang_sim.apiserver.http.app import build_app
from gang_sim.apiserver.http.auth import ALLOW_ALL, Authorizer, Rule
from gang_sim.apiserver.http.context import ApiContext
from gang_sim.apiserver.http.faults import Faults
from gang_sim.apiserver.http.metrics import RequestMetrics
from gang_sim.apiserver.registry import WORKLOAD_API_STORAGE_KEYS
from gang_sim.apiserver.store import Store

Hook = Callable[["Emulator"], Awaitable[None]]
ADMIN_USER = "admin"


class Emulator:
    """One emulated API server.

    Build it, add routes under ``/_sim/`` to :attr:`app` and coroutines to :attr:`on_startup` /
    :attr:`on_cleanup` (each called with the emulator, after the port is bound / before the server
    stops), then ``await start()``; ``await stop()`` ends it. ``store`` is usable before start.
    ``serve_workload_api=False`` is a cluster without the ``GenericWorkload`` gate (no
    ``scheduling.k8s.io/v1beta1``); ``feature_gates`` are the alpha gates that are on
    (:mod:`.feature_gates`: ``TopologyAwareWorkloadScheduling``), an unknown one is a ValueError.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Faults | str | None = None,
        use_tls: bool = True,
        seed: int | None = None,
        history_limit: int = 10_000,
        bookmark_interval_seconds: float = 5.0,
        preload_crds: bool = True,
        admin_token: str | None = None,
        store: Store | None = None,
        serve_kueue_v1beta1: bool = False,
        serve_workload_api: bool = True,
        feature_gates: Iterable[str] = (),
    ) -> None:
        self.host, self.port, self.use_tls = host, port, use_tls
        self.store = store or Store(seed=seed, history_limit=history_limit)
        if preload_crds:
            install_bundled_crds(self.store, kueue_v1beta1=serve_kueue_v1beta1)
        if not serve_workload_api:  # a cluster without the GenericWorkload feature gate
            for storage_key in WORKLOAD_API_STORAGE_KEYS:
                self.store.registry.remove_storage(storage_key)
        enable_feature_gates(self.store.registry, feature_gates)  # alpha gates (:mod:`.feature_gates`)
        # A real apiserver's watch cache starts at its own start: older resourceVersions get 410.
        self.store.compact_history()
        self.authorizer = Authorizer()
        self.admin_token = self.authorizer.add_user(ADMIN_USER, ALLOW_ALL, token=admin_token)
        self.context = ApiContext(
            store=self.store,
            authorizer=self.authorizer,
            faults=faults if isinstance(faults, Faults) else Faults.parse(faults),
            metrics=RequestMetrics(),
            bookmark_interval_seconds=bookmark_interval_seconds,
        )
        self.app = build_app(self.context)
        self.on_startup: list[Hook] = []
        self.on_cleanup: list[Hook] = []
        self._certificate = tls.generate((host, "localhost")) if use_tls else None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.url = ""

    @property
    def metrics(self) -> RequestMetrics:
        return self.context.metrics

    @property
    def faults(self) -> Faults:
        return self.context.faults

    @faults.setter
    def faults(self, value: Faults) -> None:
        self.context.faults = value

    @property
    def ca_pem(self) -> bytes | None:
        return self._certificate.ca_pem if self._certificate else None

    def add_user(self, user: str, rules: Iterable[Rule], token: str | None = None) -> str:
        """Register a user with its rules; returns the bearer token."""
        return self.authorizer.add_user(user, rules, token)

    async def start(self) -> str:
        """Bind, serve, run the startup hooks; returns the base URL."""
        runner = web.AppRunner(self.app, shutdown_timeout=1.0, handle_signals=False, access_log=None)
        await runner.setup()
        self._runner = runner
        await self._listen()
        scheme = "https" if self._certificate else "http"
        self.url = f"{scheme}://{self.host}:{self.port}"
        self.context.server_address = f"{self.host}:{self.port}"
        for hook in list(self.on_startup):
            await hook(self)
        return self.url

    async def _listen(self) -> None:
        """Accept connections on :attr:`port` (a free one when it is 0, remembered for a restart)."""
        assert self._runner is not None
        ssl_context = self._certificate.ssl_context() if self._certificate else None
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=ssl_context, shutdown_timeout=1.0)
        await site.start()
        self._site = site
        sockets: Any = getattr(site._server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]

    async def _drop_connections(self) -> None:
        """Stop listening, abort every client connection (no TLS close: idle keep-alive clients never
        answer one) and end every open watch."""
        if self._site is not None:
            site, self._site = self._site, None
            await site.stop()
        runner = self._runner
        for connection in list(runner.server.connections if runner is not None and runner.server else []):
            if connection.transport is not None:
                connection.transport.abort()
        self.store.close_all_watches()

    async def restart(self, down_seconds: float = 0.0) -> None:
        """Go down as a killed kube-apiserver does and serve again on the same address and certificate.

        Every connection is aborted mid-stream (a request in flight gets no answer; one whose body
        was already read may still take effect), watches end without a final event, connections
        are refused for ``down_seconds``, and the watch cache starts again empty: a watch from a
        resourceVersion older than the newest one gets 410 Expired, as the cacher answers once it
        is re-initialised from etcd (``staging/src/k8s.io/apiserver/pkg/storage/cacher/
        watch_cache.go``). The store is what etcd is to a real apiserver and keeps every object
        and resourceVersion; the simulated controllers (the cluster's other components) keep
        running, as they do through a control-plane upgrade.
        """
        if self._runner is None:
            raise RuntimeError("the emulator is not started")
        await self._drop_connections()
        if down_seconds > 0:
            await asyncio.sleep(down_seconds)
        self.store.compact_history()
        await self._listen()

    async def stop(self) -> None:
        """Run cleanup hooks, end open watches and stop serving (idempotent)."""
        if self._runner is None:
            return
        for hook in list(self.on_cleanup):
            await hook(self)
        await self._drop_connections()
        runner, self._runner = self._runner, None
        await runner.cleanup()

    def kubeconfig(self, token: str | None = None, namespace: str = "default") -> dict[str, Any]:
        """A kubeconfig document for ``token`` (default: the admin's)."""
        if not self.url:
            raise RuntimeError("the emulator is not started")
        return kubeconfig.build(self.url, token or self.admin_token, self.ca_pem, namespace=namespace)

    def write_kubeconfig(self, path: str | os.PathLike[str] | None = None, token: str | None = None) -> Path:
        """Write a kubeconfig (mode 0600); a temporary file when ``path`` is None."""
        if path is None:
            handle, name = tempfile.mkstemp(prefix="gang-sim-", suffix=".kubeconfig")
            os.close(handle)
            path = name
        return kubeconfig.write(path, self.kubeconfig(token))

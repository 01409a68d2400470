"""A MultiKueue worker cluster as the manager's Kueue reaches it: through the kubeconfig of its
MultiKueueCluster's Secret, over HTTPS, as upstream's remote clients do
(``pkg/controller/admissionchecks/multikueue/multikueuecluster.go``).

:class:`RemoteCluster` keeps a cache of the worker's copies - the Workloads and Jobs labelled with
the manager's origin, listed across namespaces every ``poll_seconds`` of real time (the worker runs on
a clock and event loop of its own) - and says when it changed (``on_change``), so the manager's
MultiKueue controller decides on it level-triggered, as on an informer's cache; upstream watches
instead of polling. :attr:`RemoteCluster.active` is whether the last LIST answered, with the error
otherwise: what the MultiKueueCluster's ``Active`` condition reports. Writes (:meth:`create`,
:meth:`delete`) go straight to the worker's API; a failed one is logged and decided again on the
next pass.

Only what the emulator's own kubeconfigs use is read: the server, ``certificate-authority-data``
and a bearer ``token`` of the current context (a real Kueue also takes client certificates).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import ssl
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import aiohttp

from gang_sim.controllers.base import Obj

LOG = logging.getLogger(__name__)
REQUEST_TIMEOUT_SECONDS = 10.0
Key = tuple[str, str]
"""``(namespace, name)`` of a cached object."""


class KubeconfigError(ValueError):
    """A kubeconfig the remote client cannot use (what upstream reports as ``BadKubeConfig``)."""


def connection_of(kubeconfig: Mapping[str, Any]) -> tuple[str, str | None, bytes | None]:
    """``(server, token, CA PEM)`` of the current context of a kubeconfig document."""
    try:
        contexts = {item["name"]: item["context"] for item in kubeconfig.get("contexts") or []}
        context = contexts[kubeconfig["current-context"]]
        cluster = {item["name"]: item["cluster"] for item in kubeconfig.get("clusters") or []}[context["cluster"]]
        user = {item["name"]: item["user"] for item in kubeconfig.get("users") or []}.get(context.get("user"), {})
    except (KeyError, TypeError) as error:
        raise KubeconfigError(f"no usable current context ({error})") from error
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigError("the cluster has no server")
    ca = cluster.get("certificate-authority-data")
    return server.rstrip("/"), user.get("token"), base64.b64decode(ca) if ca else None


def resource_path(resource: str, namespace: str | None = None, name: str | None = None) -> str:
    """The URL path of a store resource key (``"batch/v1/jobs"``, ``"v1/pods"``)."""
    *group_version, plural = resource.split("/")
    prefix = "/api/" + group_version[0] if len(group_version) == 1 else "/apis/" + "/".join(group_version)
    path = prefix + (f"/namespaces/{quote(namespace, safe='')}" if namespace else "") + f"/{plural}"
    return path + (f"/{quote(name, safe='')}" if name else "")


class RemoteCluster:
    """One worker cluster: the cached copies of ``origin`` and the client writing there."""

    def __init__(
        self,
        name: str,
        kubeconfig: Mapping[str, Any],
        origin_selector: str,
        on_change: Callable[[], None],
        *,
        poll_seconds: float,
        resources: tuple[str, ...],
    ) -> None:
        self.name = name
        self.server, token, ca = connection_of(kubeconfig)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._ssl: ssl.SSLContext | bool = ssl.create_default_context(cadata=ca.decode()) if ca else False
        self._selector = origin_selector
        self._on_change = on_change
        self._poll_seconds = poll_seconds
        self._resources = resources
        self.objects: dict[str, dict[Key, Obj]] = {resource: {} for resource in resources}
        self.active: bool | None = None
        """``None`` until the first LIST answered or failed."""
        self.error = ""
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._poke = asyncio.Event()

    def start(self) -> None:
        """Begin polling on the running event loop."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS))
        self._task = asyncio.ensure_future(self._poll())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._session is not None:
            await self._session.close()

    def poke(self) -> None:
        """List again now (after a write)."""
        self._poke.set()

    async def _poll(self) -> None:
        while True:
            self._poke.clear()
            try:
                listed = {resource: await self._list(resource) for resource in self._resources}
                changed = listed != self.objects or self.active is not True
                self.objects, self.active, self.error = listed, True, ""
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as error:
                changed = self.active is not False or self.error != str(error)
                self.active, self.error = False, f"{type(error).__name__}: {error}"
            if changed:
                self._on_change()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._poke.wait(), self._poll_seconds)

    async def _request(self, method: str, path: str, **options: Any) -> Any:
        assert self._session is not None, "start() first"
        async with self._session.request(
            method, self.server + path, headers=self._headers, ssl=self._ssl, **options
        ) as response:
            body = await response.json(content_type=None)
            if response.status >= 400 and not (method == "DELETE" and response.status == 404):
                message = body.get("message", "") if isinstance(body, dict) else ""
                raise aiohttp.ClientResponseError(
                    response.request_info, (), status=response.status, message=str(message)
                )
            return body

    async def _list(self, resource: str) -> dict[Key, Obj]:
        body = await self._request("GET", resource_path(resource), params={"labelSelector": self._selector})
        items = body.get("items") or [] if isinstance(body, dict) else []
        return {(item["metadata"]["namespace"], item["metadata"]["name"]): item for item in items}

    async def create(self, resource: str, body: Obj) -> None:
        """Create ``body``; an object of that name already there counts as created (409)."""
        path = resource_path(resource, body["metadata"]["namespace"])
        try:
            await self._request("POST", path, json=body)
        except aiohttp.ClientResponseError as error:
            if error.status != 409:
                raise

    async def delete(self, resource: str, namespace: str, name: str) -> None:
        """Delete with background propagation (its dependents go with it); gone already counts."""
        await self._request(
            "DELETE", resource_path(resource, namespace, name), json={"propagationPolicy": "Background"}
        )

"""The provider's one asynchronous Kubernetes API client.

One :class:`KubeClient` is built per trigger (or per operator call) and reused for every request, so a
waiting gang holds one connection pool instead of opening a TCP+TLS connection per poll as the
cncf-kubernetes async hook does (``AsyncKubernetesHook`` in cncf-kubernetes ``hooks/kubernetes.py`` and the
``KubernetesPodTrigger`` loop of ``triggers/pod.py``; its PR #71349).

Why aiohttp with kubernetes_asyncio's configuration, and not kubernetes_asyncio's generated APIs:

* authentication and TLS come from kubernetes_asyncio unchanged: :mod:`.settings` runs its kubeconfig /
  in-cluster loaders, and the aiohttp session is the one its ``RESTClientObject`` builds (CA bundle,
  client certificates, ``insecure-skip-tls-verify``, ``tls-server-name``, proxy);
* the generated ``CustomObjectsApi.patch_*`` methods send ``application/json-patch+json`` for every patch
  (emulation reference 5.4), which a real server rejects for a merge patch; here every patch states its
  Content-Type explicitly;
* a watch needs a socket read timeout (half-open connections), resume from the last resourceVersion,
  bookmarks and 410 handling; that is easier to get right on the raw stream (:mod:`.watch`);
* ``Retry-After`` and the ``Status`` body are needed for :mod:`.errors` and :mod:`.retry`, and objects
  stay plain dicts, the shape ``reservation`` decides on.

Every request has a timeout; 429/5xx and transport errors are retried with backoff (:mod:`.retry`); a
401 reloads credentials once (exec plugins, rotated service account tokens) before it is raised.
Every attempt (and every watch) first takes a token of the client's rate limiter
(:mod:`.rate_limit`), and at most ``max_parallel_requests`` requests are in flight at once (a slot
is held while sending, not during a retry's backoff).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from enum import Enum
from typing import Any

import aiohttp
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.client.rest import RESTClientObject

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.rate_limit import TokenBucket
from airflow_provider_gang.kube.resources import Resource
from airflow_provider_gang.kube.retry import RetryPolicy
from airflow_provider_gang.kube.settings import ConnectionSettings, CredentialReloader, load_configuration

Sleep = Callable[[float], Awaitable[None]]
USER_AGENT = "airflow-provider-gang"


class PatchType(str, Enum):
    """Patch flavours and the Content-Type the API server dispatches on."""

    MERGE = "application/merge-patch+json"  # RFC 7386
    JSON = "application/json-patch+json"  # RFC 6902
    STRATEGIC = "application/strategic-merge-patch+json"  # built-in kinds only (415 on custom objects)
    APPLY = "application/apply-patch+yaml"  # server-side apply; needs a field manager


class KubeClient:
    """JSON-over-HTTP client for the Kubernetes API with retries, typed errors and one session.

    Args:
        configuration: a loaded kubernetes_asyncio ``Configuration`` (see :func:`connect`).
        reload_credentials: called once after a 401 to refresh credentials.
        namespace: default namespace for namespaced calls that pass none.
        request_timeout: seconds allowed for each whole request (connect to last byte).
        retry: backoff policy for 429/5xx/transport errors.
        sleep: awaited between retries (inject a fake in tests).
        rate_limiter: taken before every attempt and every watch (``None``: no limit).
        max_parallel_requests: requests in flight at most, streams not counted (``None``: no bound
            but the connection pool's).

    ``requests_sent`` counts HTTP requests actually sent, retries included.
    """

    def __init__(
        self,
        configuration: Configuration,
        reload_credentials: CredentialReloader,
        *,
        namespace: str = "default",
        request_timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        rate_limiter: TokenBucket | None = None,
        max_parallel_requests: int | None = None,
    ) -> None:
        self.configuration = configuration
        self.rate_limiter = rate_limiter
        self.max_parallel_requests = max_parallel_requests
        self._slots = asyncio.Semaphore(max_parallel_requests) if max_parallel_requests else None
        self.namespace = namespace
        self.request_timeout = request_timeout
        self.retry = retry or RetryPolicy()
        self.requests_sent = 0
        self._reload_credentials = reload_credentials
        self._sleep = sleep
        self._rest = RESTClientObject(configuration)
        self._session: aiohttp.ClientSession = self._rest.pool_manager
        self._host = str(configuration.host).rstrip("/")

    @classmethod
    async def connect(cls, settings: ConnectionSettings, **options: Any) -> KubeClient:
        """Load ``settings`` (auth included) and build a client; ``options`` go to the constructor."""
        configuration, reloader = await load_configuration(settings)
        options.setdefault("namespace", settings.namespace)
        return cls(configuration, reloader, **options)

    async def close(self) -> None:
        """Close the connection pool. Idempotent."""
        await self._rest.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- object verbs ---------------------------------------------------------------------------------

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        """GET one object; :class:`errors.NotFound` if it does not exist."""
        return await self._request_object("GET", resource.path(self._ns(resource, namespace), name))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        page_size: int = 500,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """LIST objects (following ``continue`` pages); returns the items and the list's resourceVersion.
        ``transform`` is applied to each page's items before the next page is read, so a caller that
        keeps a part of each object never holds more than one page of whole ones."""
        items: list[dict[str, Any]] = []
        params: dict[str, str] = {"limit": str(page_size)}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        while True:
            page = await self._request_object("GET", resource.path(self._ns(resource, namespace)), params=params)
            found = page.get("items") or []
            items.extend(found if transform is None else [transform(item) for item in found])
            metadata = page.get("metadata") or {}
            if not metadata.get("continue"):
                return items, str(metadata.get("resourceVersion", ""))
            params["continue"] = str(metadata["continue"])

    async def create(self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """POST a new object. With deterministic names, callers treat :class:`errors.AlreadyExists` as done."""
        return await self._request_object("POST", resource.path(self._ns(resource, namespace)), body=body)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = PatchType.MERGE,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PATCH with an explicit Content-Type (``patch_type``); ``patch`` is a dict, or a list for JSON patch."""
        params: dict[str, str] = {}
        if field_manager or patch_type is PatchType.APPLY:
            params["fieldManager"] = field_manager or USER_AGENT
        path = resource.path(self._ns(resource, namespace), name, subresource)
        return await self._request_object("PATCH", path, params=params, body=patch, content_type=patch_type.value)

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str = "Background",
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, str] | None = None,
    ) -> bool:
        """DELETE one object; ``False`` if it was already gone (deleting is idempotent).

        ``preconditions`` (``{"uid": ..., "resourceVersion": ...}``, DeleteOptions.preconditions) make
        the delete conditional: the API server answers 409 (:class:`errors.Conflict`) instead of
        deleting when the object changed since it was read - an atomic compare-and-delete.
        """
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation_policy}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = dict(preconditions)
        try:
            await self.request_json("DELETE", resource.path(self._ns(resource, namespace), name), body=options)
        except errors.NotFound:
            return False
        return True

    # -- transport ------------------------------------------------------------------------------------

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        """Send one request with retries and return the decoded JSON body.

        Raises the typed error of :mod:`.errors` for an error answer; retryable ones only once the
        retry budget is spent.
        """
        failures = 0
        credentials_reloaded = False
        while True:
            try:
                return await self._send_throttled(method, path, params, body, content_type)
            except errors.Unauthorized:
                if credentials_reloaded:
                    raise
                credentials_reloaded = True
                await self._reload_credentials()
            except errors.KubeError as error:
                if not error.retryable:
                    raise
                failures += 1
                if failures >= self.retry.attempts:
                    raise
                retry_after = error.retry_after if isinstance(error, errors.Unavailable) else None
                await self._sleep(self.retry.delay(failures, retry_after))

    async def _request_object(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        answer = await self.request_json(method, path, **options)
        if not isinstance(answer, dict):
            raise errors.TransportError(f"{method} {path}: expected a JSON object, got {type(answer).__name__}")
        return answer

    async def _send_throttled(
        self, method: str, path: str, params: Mapping[str, str] | None, body: Any, content_type: str
    ) -> Any:
        """One attempt inside a parallel-request slot, after a token of the rate limiter."""
        if self._slots is None:
            await self._throttle()
            return await self._send_once(method, path, params, body, content_type)
        async with self._slots:
            await self._throttle()
            return await self._send_once(method, path, params, body, content_type)

    async def _throttle(self) -> None:
        if self.rate_limiter is not None:
            await self.rate_limiter.acquire()

    async def _send_once(
        self, method: str, path: str, params: Mapping[str, str] | None, body: Any, content_type: str
    ) -> Any:
        headers = await self._headers(content_type if body is not None else None)
        data = json.dumps(body).encode() if body is not None else None
        try:
            async with self._session.request(
                method,
                self._host + path,
                params=params,
                data=data,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.request_timeout),
                **self._transport_options(),
            ) as response:
                self.requests_sent += 1
                raw = await response.read()
                decoded = _decode(raw)
                if response.status >= 400:
                    raise errors.from_status(response.status, decoded, response.headers.get("Retry-After"))
                if raw and not isinstance(decoded, (dict, list)):
                    raise errors.TransportError(f"{method} {path}: answer is not JSON")
                return decoded
        except (aiohttp.ClientError, TimeoutError) as error:
            raise errors.TransportError(f"{method} {path}: {type(error).__name__}: {error}") from error

    @asynccontextmanager
    async def open_stream(
        self, path: str, params: Mapping[str, str], *, read_timeout: float
    ) -> AsyncIterator[aiohttp.StreamReader]:
        """Open a long-lived GET (a watch) and yield its body stream; used by :mod:`.watch`.

        The connect phase is bounded by ``request_timeout``; each read by ``read_timeout``, so a
        half-open socket surfaces as :class:`errors.TransportError` instead of hanging forever.
        """
        await self._throttle()
        headers = await self._headers(None)
        timeout = aiohttp.ClientTimeout(total=None, connect=self.request_timeout, sock_read=read_timeout)
        try:
            async with self._session.get(
                self._host + path, params=params, headers=headers, timeout=timeout, **self._transport_options()
            ) as response:
                self.requests_sent += 1
                if response.status >= 400:
                    decoded = _decode(await response.read())
                    if response.status == 401:
                        await self._reload_credentials()
                    raise errors.from_status(response.status, decoded, response.headers.get("Retry-After"))
                try:
                    yield response.content
                except BaseException:
                    # An abandoned stream is never reused: abort the socket at once. A graceful TLS
                    # close would still be in flight when the caller closes the client and its loop.
                    _abort(response)
                    raise
        except (aiohttp.ClientError, TimeoutError) as error:
            raise errors.TransportError(f"watch {path}: {type(error).__name__}: {error}") from error

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if content_type:
            headers["Content-Type"] = content_type
        auth = await self.configuration.auth_settings()
        token = auth.get("BearerToken", {}).get("value")
        if token:
            headers["Authorization"] = str(token)
        elif self.configuration.username or self.configuration.password:
            headers["Authorization"] = str(self.configuration.get_basic_auth_token())
        return headers

    def _transport_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.configuration.proxy:
            options["proxy"] = self.configuration.proxy
        if self._rest.server_hostname:
            options["server_hostname"] = self._rest.server_hostname
        return options

    def _ns(self, resource: Resource, namespace: str | None) -> str | None:
        return (namespace or self.namespace) if resource.namespaced else None


def _abort(response: aiohttp.ClientResponse) -> None:
    connection = response.connection
    if connection is not None and connection.protocol is not None:
        connection.protocol.abort()


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", errors="replace") or None

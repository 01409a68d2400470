"""How patient a client is: per-request timeout and retry budget, as plain values that travel in
trigger kwargs and operator arguments.

Every API call of a try - in the worker and in the triggerer - is made by a client built from one
:class:`ClientOptions`, so "a call failing past its retries" means the same thing everywhere. Keys of
the plain form (``to_dict``) are a stored format (serialized triggers carry them): add keys with
defaults, never rename one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.rate_limit import TokenBucket
from airflow_provider_gang.kube.retry import RetryPolicy
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import deployment
from airflow_provider_gang.reservation.deployment import CLIENT_DEFAULTS

MAX_PARALLEL_REQUESTS = deployment.MAX_PARALLEL_REQUESTS


@dataclass(frozen=True)
class ClientOptions:
    """Fields (defaults: ``reservation.deployment.CLIENT_DEFAULTS``, which the ``[gang] client_*``
    options of Airflow's configuration override deployment-wide):
    request_timeout: seconds one request (connect, send, read the whole answer) may take.
    retry_attempts: tries per request, the first included (429, 5xx and transport errors are
        retried; ``kube.errors`` says which errors are retryable). The default 10 with the default
        curve waits about a minute in all (at most two) before the last try: a call rides out an
        API server restart or a control-plane upgrade's switch-over, which refuse connections for
        tens of seconds, as the waits do for ``unreachable_timeout``.
    retry_base_delay, retry_max_delay: the backoff curve (``kube.retry.RetryPolicy``).
    qps, burst: the client-side rate limit (``kube.rate_limit.TokenBucket``): ``burst`` requests
        at once, then ``qps`` per second; every attempt and every watch takes a token, as in
        client-go. ``qps=0`` turns the limit off. The defaults are Kueue's (1000/1000 since
        v0.20, kubernetes-sigs/kueue#15206), a controller that creates gangs' pods too:
        client-go's 5/10 (``rest.DefaultQPS``/``DefaultBurst``) would take 50 s to create a
        gang of 256; cncf-kubernetes' client has no limit at all. The API server protects
        itself with API Priority and Fairness: its 429s are retried, honouring Retry-After.
    max_parallel_requests: requests one client has in flight at most (watch streams not
        counted); a gang's members are created or released by this many workers at once. At
        most :data:`MAX_PARALLEL_REQUESTS`, so no request spends its ``request_timeout``
        queued for a connection of the pool.
    """

    request_timeout: float = float(CLIENT_DEFAULTS["request_timeout"])
    retry_attempts: int = int(CLIENT_DEFAULTS["retry_attempts"])
    retry_base_delay: float = float(CLIENT_DEFAULTS["retry_base_delay"])
    retry_max_delay: float = float(CLIENT_DEFAULTS["retry_max_delay"])
    qps: float = float(CLIENT_DEFAULTS["qps"])
    burst: int = int(CLIENT_DEFAULTS["burst"])
    max_parallel_requests: int = int(CLIENT_DEFAULTS["max_parallel_requests"])

    def __post_init__(self) -> None:
        problem = deployment.client_option_problem(asdict(self))
        if problem is not None:
            raise ValueError(problem)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> ClientOptions:
        """From the plain form; ``ValueError`` names an unknown key and lists the known ones."""
        values = dict(values or {})
        problem = deployment.client_option_problem(values)
        if problem is not None:
            raise ValueError(problem)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            attempts=int(self.retry_attempts),
            base_delay=float(self.retry_base_delay),
            max_delay=float(self.retry_max_delay),
        )

    def rate_limiter(self) -> TokenBucket | None:
        """A new bucket for one client, or ``None`` with ``qps=0``."""
        return TokenBucket(float(self.qps), int(self.burst)) if self.qps > 0 else None

    async def connect(self, settings: ConnectionSettings) -> KubeClient:
        """A new client for ``settings`` with these options; the caller closes it."""
        return await KubeClient.connect(
            settings,
            request_timeout=float(self.request_timeout),
            retry=self.retry_policy(),
            rate_limiter=self.rate_limiter(),
            max_parallel_requests=int(self.max_parallel_requests),
        )

"""How patient a client is: per-request timeout and retry budget, as plain values that travel in
trigger kwargs and operator arguments.

Every API call of a try - in the worker and in the triggerer - is made by a client built from one
:class:`ClientOptions`, so "a call failing past its retries" means the same thing everywhere. Keys of
the plain form (``to_dict``) are a stored format (serialized triggers carry them): add keys with
defaults, never rename one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.retry import RetryPolicy
from airflow_provider_gang.kube.settings import ConnectionSettings


@dataclass(frozen=True)
class ClientOptions:
    """Fields:
        request_timeout: seconds one request (connect, send, read the whole answer) may take.
        retry_attempts: tries per request, the first included (429, 5xx and transport errors are
            retried; ``kube.errors`` says which errors are retryable).
        retry_base_delay, retry_max_delay: the backoff curve (``kube.retry.RetryPolicy``).
    """

    request_timeout: float = 30.0
    retry_attempts: int = 6
    retry_base_delay: float = 0.5
    retry_max_delay: float = 30.0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{item.name} must be a number >= 0, not {value!r}")
        if self.retry_attempts < 1 or int(self.retry_attempts) != self.retry_attempts:
            raise ValueError(f"retry_attempts must be a whole number >= 1, not {self.retry_attempts!r}")
        if self.request_timeout <= 0:
            raise ValueError(f"request_timeout must be > 0, not {self.request_timeout!r}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> ClientOptions:
        """From the plain form; ``ValueError`` names an unknown key and lists the known ones."""
        values = dict(values or {})
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown client option(s) {unknown}; known: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(attempts=int(self.retry_attempts), base_delay=float(self.retry_base_delay),
                           max_delay=float(self.retry_max_delay))

    async def connect(self, settings: ConnectionSettings) -> KubeClient:
        """A new client for ``settings`` with these options; the caller closes it."""
        return await KubeClient.connect(settings, request_timeout=float(self.request_timeout),
                                        retry=self.retry_policy())

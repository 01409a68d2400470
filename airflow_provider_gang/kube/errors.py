"""Typed errors for every Kubernetes API call the provider makes.

HTTP status codes are mapped to these classes once, here (the approach of kopf's
``_cogs/clients/errors.py``); callers catch the class that matches the decision they have to make, and
the operator layer converts them to Airflow exceptions. ``retryable`` says whether the *same* request
may succeed if sent again later::

    KubeError                       base; .retryable
    ├── ApiError                    the server answered with a Status (.code, .reason, .status_body)
    │   ├── BadRequest        400   malformed request (also 415 UnsupportedMediaType, 405)
    │   ├── Unauthorized      401   credentials missing or expired
    │   ├── Forbidden         403   RBAC denies the verb
    │   ├── NotFound          404   object (or namespace, or API kind) does not exist
    │   ├── Conflict          409   stale resourceVersion
    │   │   └── AlreadyExists 409   create of an existing name (reason AlreadyExists)
    │   ├── Gone              410   resourceVersion too old (watch must relist)
    │   ├── Invalid           422   validation failed; .causes lists field errors
    │   └── Unavailable       429, 5xx   retryable; .retry_after from the Retry-After header
    └── TransportError              no usable answer: connection refused/reset, timeout, cut stream
                                    (retryable)

Lower-level exceptions (aiohttp, JSON decoding) are chained with ``raise ... from``. A request that
exhausts its retries raises its last retryable error, so ``retryable`` still tells the caller that a
later attempt may help.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class KubeError(Exception):
    """Base of every error raised by :mod:`airflow_provider_gang.kube`."""

    retryable: bool = False


class TransportError(KubeError):
    """The request got no usable answer (connection error, timeout, stream cut)."""

    retryable = True


@dataclass(frozen=True)
class Cause:
    """One field error of an ``Invalid`` Status (``details.causes[]``)."""

    field: str
    reason: str
    message: str


class ApiError(KubeError):
    """The API server answered with an error ``Status``.

    ``code`` is the HTTP status, ``reason`` the Status ``reason`` (e.g. ``NotFound``), ``message`` the
    server's human message and ``status_body`` the whole decoded body (``{}`` when it was not JSON).
    """

    def __init__(self, code: int, reason: str, message: str, status_body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status_body = status_body or {}


class BadRequest(ApiError):
    """400/405/415: the request itself is wrong; sending it again cannot help."""


class Unauthorized(ApiError):
    """401: credentials missing or expired (the client reloads credentials once before raising)."""


class Forbidden(ApiError):
    """403: RBAC forbids this verb on this resource."""


class NotFound(ApiError):
    """404: the object, its namespace or its API kind does not exist."""


class Conflict(ApiError):
    """409: the write was based on a stale resourceVersion."""


class AlreadyExists(Conflict):
    """409 with reason ``AlreadyExists``: a create hit an existing name."""


class Gone(ApiError):
    """410 ``Expired``: the resourceVersion is older than the server's history; list again."""


class Invalid(ApiError):
    """422: the object failed validation. ``causes`` names each offending field."""

    @property
    def causes(self) -> tuple[Cause, ...]:
        """The Status ``details.causes``, read from ``status_body``."""
        details = self.status_body.get("details") or {}
        return tuple(
            Cause(str(cause.get("field", "")), str(cause.get("reason", "")), str(cause.get("message", "")))
            for cause in details.get("causes") or ()
            if isinstance(cause, dict)
        )


class Unavailable(ApiError):
    """429 or 5xx: the server is overloaded or failing; retry after ``retry_after`` seconds if given."""

    retryable = True

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        status_body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(code, reason, message, status_body)
        self.retry_after = retry_after


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: BadRequest,
    409: Conflict,
    410: Gone,
    415: BadRequest,
    422: Invalid,
}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (the API server sends delta-seconds, RFC 9110 10.2.3).

    HTTP-dates are not produced by kube-apiserver and are treated as absent.
    """
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return max(0.0, seconds)


def from_status(code: int, body: Any, retry_after_header: str | None = None) -> ApiError:
    """Map one HTTP error answer to its typed error.

    ``body`` is the decoded JSON body (a ``Status`` on a real server) or anything else when the server
    sent no JSON (for example a proxy's HTML page); ``reason`` then falls back to the HTTP status.
    """
    status_body: dict[str, Any] = body if isinstance(body, dict) else {}
    reason = str(status_body.get("reason") or f"HTTP{code}")
    message = str(status_body.get("message") or (body if isinstance(body, str) else "") or reason)
    if code == 429 or code >= 500:
        retry_after = parse_retry_after(retry_after_header)
        if retry_after is None:  # the Status repeats it as details.retryAfterSeconds
            details_seconds = (status_body.get("details") or {}).get("retryAfterSeconds")
            retry_after = parse_retry_after(None if details_seconds is None else str(details_seconds))
        return Unavailable(code, reason, message, status_body, retry_after=retry_after)
    if code == 409 and reason == "AlreadyExists":
        return AlreadyExists(code, reason, message, status_body)
    error_class = _BY_CODE.get(code, BadRequest if 400 <= code < 500 else ApiError)
    return error_class(code, reason, message, status_body)

"""Kubernetes API errors as the emulator raises and renders them.

Every failure of the store or the HTTP layer is an :class:`ApiError`; the HTTP layer renders it as a
``v1 Status`` body exactly like ``k8s.io/apimachinery/pkg/api/errors`` does::

    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
     "message": "...", "reason": "NotFound", "details": {"name": "x", "kind": "pods"}, "code": 404}

``details.causes`` carries field-level problems (``{"reason": "FieldValueInvalid", "message": ...,
"field": "spec.podSets"}``) for 422 Invalid, which is what clients and kubectl print.

The constructor functions below reproduce the upstream message formats (``NewNotFound``,
``NewAlreadyExists``, ``NewConflict``, ``NewInvalid``, ...), so tests can compare messages with
a real apiserver's.
"""

from __future__ import annotations

from typing import Any

Cause = dict[str, str]


class ApiError(Exception):
    """A failed API request: HTTP ``code``, machine-readable ``reason``, human ``message``.

    ``causes`` are field-level causes (each ``{"reason", "message", "field"}``); ``details`` holds the
    rest of ``Status.details`` (``name``, ``group``, ``kind``, ``retryAfterSeconds``).
    """

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        causes: list[Cause] | None = None,
        *,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.causes = list(causes or [])
        self.details = dict(details or {})

    def to_status(self) -> dict[str, Any]:
        """The ``v1 Status`` body for this error."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:  # e.g. the bare 500s upstream answers without a reason
            del status["reason"]
        details = dict(self.details)
        if self.causes:
            details["causes"] = list(self.causes)
        if details:
            status["details"] = details
        return status

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.reason!r}, {self.message!r})"


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    """404 NotFound: ``pods "x" not found`` (``details.kind`` is the plural, as upstream)."""
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return ApiError(404, "NotFound", f'{_qualified(plural, group)} "{name}" not found', details=details)


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    """409 AlreadyExists."""
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return ApiError(409, "AlreadyExists", f'{_qualified(plural, group)} "{name}" already exists', details=details)


def conflict(plural: str, name: str, group: str = "", *, why: str = "") -> ApiError:
    """409 Conflict on a stale resourceVersion (optimistic concurrency)."""
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        details=details,
    )


def field_cause(reason: str, field: str, message: str) -> Cause:
    """One ``details.causes`` entry. ``reason`` is e.g. FieldValueInvalid, FieldValueRequired."""
    return {"reason": reason, "message": message, "field": field}


def invalid(kind: str, name: str, causes: list[Cause], group: str = "") -> ApiError:
    """422 Invalid: ``Pod "x" is invalid: [field: message, ...]`` (upstream ``NewInvalid``)."""
    rendered = [f"{cause['field']}: {cause['message']}" if cause.get("field") else cause["message"] for cause in causes]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    qualified = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = {"name": name, "kind": kind} if name else {"kind": kind}
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', causes, details=details)


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str) -> ApiError:
    """405 MethodNotAllowed."""
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    """415 UnsupportedMediaType (e.g. a strategic merge patch on a custom resource)."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    )


def expired(message: str) -> ApiError:
    """410 Expired: a watch or list resourceVersion older than the kept history."""
    return ApiError(410, "Expired", message)


def unauthorized() -> ApiError:
    """401 Unauthorized: no or unknown bearer token."""
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, plural: str, group: str, namespace: str | None, name: str = "") -> ApiError:
    """403 Forbidden with the RBAC authorizer's message format."""
    resource = f'resource "{plural}" in API group "{group}"'
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    details: dict[str, Any] = {"kind": plural}
    if group:
        details["group"] = group
    if name:
        details["name"] = name
    target = f'{plural} "{name}" is forbidden' if name else f"{_qualified(plural, group)} is forbidden"
    return ApiError(
        403,
        "Forbidden",
        f'{target}: User "{user}" cannot {verb} {resource} {scope}',
        details=details,
    )

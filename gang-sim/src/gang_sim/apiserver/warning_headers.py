"""API warnings of the current request (the ``Warning: 299 - "..."`` response headers).

Admission code calls :func:`warn` (e.g. unknown fields pruned with ``fieldValidation=Warn``); the
HTTP layer opens a collection per request with :func:`collect` and turns it into headers, which
kubectl prints as ``Warning: ...``. Outside a request (direct store use) warnings are dropped.
"""

from __future__ import annotations

import contextvars

_CURRENT: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("gang_sim_warnings", default=None)


def collect() -> list[str]:
    """Start collecting this task's warnings; returns the list they are appended to."""
    collected: list[str] = []
    _CURRENT.set(collected)
    return collected


def warn(message: str) -> None:
    collected = _CURRENT.get()
    if collected is not None and message not in collected:
        collected.append(message)


def header_value(message: str) -> str:
    """RFC 7234 warn-code 299 with the apiserver's ``-`` agent, as client-go parses it."""
    escaped = message.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'

"""What the HTTP handlers share: the store, authorization, faults, metrics and stream settings."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gang_sim.apiserver.errors import ApiError
from gang_sim.apiserver.http.auth import Authorizer
from gang_sim.apiserver.http.faults import Faults
from gang_sim.apiserver.http.metrics import RequestMetrics
from gang_sim.apiserver.http.requestlog import RequestLog
from gang_sim.apiserver.store import Store


@dataclass
class ApiContext:
    """Per-server state. ``faults`` is replaced wholesale when changed at run time; ``fault_clock``
    times the windows of faults set over ``/_sim/faults``."""

    store: Store
    authorizer: Authorizer = field(default_factory=Authorizer)
    faults: Faults = field(default_factory=Faults)
    metrics: RequestMetrics = field(default_factory=RequestMetrics)
    requests: RequestLog = field(default_factory=RequestLog)
    fault_clock: Callable[[], float] = time.monotonic
    bookmark_interval_seconds: float = 5.0
    default_watch_timeout_seconds: float = 1800.0
    server_address: str = "127.0.0.1:0"


CONTEXT = web.AppKey("gang_sim_api_context", ApiContext)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def status_response(error: ApiError) -> web.Response:
    """Render an error as a ``Status`` body with its code (and ``Retry-After`` for 429)."""
    headers = {}
    if "retryAfterSeconds" in error.details:
        headers["Retry-After"] = str(error.details["retryAfterSeconds"])
    return json_response(error.to_status(), status=error.code, headers=headers)


def success_status(name: str, group: str, kind: str, uid: str = "") -> dict[str, Any]:
    """The ``Status`` a custom-resource DELETE answers with."""
    details: dict[str, Any] = {"name": name, "group": group, "kind": kind}
    if uid:
        details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

"""Server-side printing (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) for ``kubectl get``.

kubectl asks for ``meta.k8s.io/v1`` Tables and prints their cells; without them it only shows
NAME and AGE. Columns follow upstream's printers (``pkg/printers/internalversion/printers.go``) for
the built-in kinds the project watches (Pod READY/STATUS/RESTARTS, Job STATUS/COMPLETIONS, Node,
Namespace, Service, ConfigMap, Event) and a CRD's ``additionalPrinterColumns`` for custom resources
(JSONPath subset: fields, ``[n]``, ``[*]``, ``[?(@.f=='v')]``). Ages are rendered like
``duration.HumanDuration``. Rows carry ``PartialObjectMetadata`` (``includeObject=Metadata``).
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Callable
from typing import Any

from gang_sim.apiserver.registry import ResourceType

Object = dict[str, Any]
Column = tuple[str, str, Callable[[Object], Any], int]  # name, type, cell function, priority


def wants_table(accept: str) -> bool:
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``."""
    if seconds < -1:
        return "<invalid>"
    total = max(0, int(seconds))
    minutes, hours = total // 60, total // 3600
    if total < 120:
        return f"{total}s"
    if minutes < 10:
        return f"{minutes}m" if total % 60 == 0 else f"{minutes}m{total % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years = hours // (24 * 365)
    days = (hours // 24) % 365
    return f"{years}y" if years >= 8 or days == 0 else f"{years}y{days}d"


def age_of(timestamp: str | None, now: float | None = None) -> str:
    if not timestamp:
        return "<unknown>"
    moment = calendar.timegm(time.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ"))
    return human_duration((time.time() if now is None else now) - moment)


def _age(obj: Object) -> str:
    return age_of((obj.get("metadata") or {}).get("creationTimestamp"))


def pod_status(pod: Object) -> str:
    """The STATUS column of ``kubectl get pods`` (upstream ``printPod`` precedence)."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    if any(c.get("reason") == "SchedulingGated" for c in status.get("conditions") or []) and reason == "Pending":
        reason = "SchedulingGated"
    for container in reversed(status.get("containerStatuses") or []):
        state = container.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            terminated = state["terminated"] or {}
            reason = terminated.get("reason") or f"ExitCode:{terminated.get('exitCode', 0)}"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_ready(pod: Object) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _job_status(job: Object) -> str:
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed", "Suspended"):
            return str(condition["type"])
    return "Running"


def _none_if_empty(text: str) -> str:
    return text or "<none>"


def _selector(labels: dict[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or "<none>"


def _service_ports(service: Object) -> str:
    ports = (service.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _job_duration(job: Object) -> str:
    """Completion minus start, or time running so far; empty before the Job started (upstream printJob)."""
    status = job.get("status") or {}
    if not status.get("startTime"):
        return ""
    start = calendar.timegm(time.strptime(status["startTime"], "%Y-%m-%dT%H:%M:%SZ"))
    end = (
        calendar.timegm(time.strptime(status["completionTime"], "%Y-%m-%dT%H:%M:%SZ"))
        if status.get("completionTime")
        else time.time()
    )
    return human_duration(end - start)


def _field(path: str) -> Callable[[Object], Any]:
    return lambda obj: evaluate(obj, path) or "<none>"


_BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "/pods": [
        ("Ready", "string", _pod_ready, 0),
        ("Status", "string", pod_status, 0),
        (
            "Restarts",
            "string",
            lambda p: str(
                sum(s.get("restartCount", 0) for s in (p.get("status") or {}).get("containerStatuses") or [])
            ),
            0,
        ),
        ("Age", "string", _age, 0),
        ("IP", "string", _field(".status.podIP"), 1),
        ("Node", "string", _field(".spec.nodeName"), 1),
        ("Nominated Node", "string", _field(".status.nominatedNodeName"), 1),
        (
            "Readiness Gates",
            "string",
            lambda p: _none_if_empty(evaluate(p, ".spec.readinessGates[*].conditionType")),
            1,
        ),
    ],
    "batch/jobs": [
        ("Status", "string", _job_status, 0),
        (
            "Completions",
            "string",
            lambda j: f"{(j.get('status') or {}).get('succeeded', 0)}/{(j.get('spec') or {}).get('completions', 1)}",
            0,
        ),
        ("Duration", "string", _job_duration, 0),
        ("Age", "string", _age, 0),
        ("Containers", "string", lambda j: _none_if_empty(evaluate(j, ".spec.template.spec.containers[*].name")), 1),
        ("Images", "string", lambda j: _none_if_empty(evaluate(j, ".spec.template.spec.containers[*].image")), 1),
        ("Selector", "string", lambda j: _selector((j.get("spec") or {}).get("selector", {}).get("matchLabels")), 1),
    ],
    "/nodes": [
        (
            "Status",
            "string",
            lambda n: (
                "Ready"
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (n.get("status") or {}).get("conditions") or []
                )
                else "NotReady"
            ),
            0,
        ),
        ("Age", "string", _age, 0),
    ],
    "/namespaces": [("Status", "string", _field(".status.phase"), 0), ("Age", "string", _age, 0)],
    "/services": [
        ("Type", "string", _field(".spec.type"), 0),
        ("Cluster-IP", "string", _field(".spec.clusterIP"), 0),
        (
            "External-IP",
            "string",
            lambda s: _none_if_empty(",".join((s.get("spec") or {}).get("externalIPs") or [])),
            0,
        ),
        ("Port(s)", "string", _service_ports, 0),
        ("Age", "string", _age, 0),
        ("Selector", "string", lambda s: _selector((s.get("spec") or {}).get("selector")), 1),
    ],
    "/configmaps": [
        ("Data", "integer", lambda c: len(c.get("data") or {}) + len(c.get("binaryData") or {}), 0),
        ("Age", "string", _age, 0),
    ],
    "/events": [
        ("Type", "string", _field(".type"), 0),
        ("Reason", "string", _field(".reason"), 0),
        (
            "Object",
            "string",
            lambda e: (
                f"{(e.get('involvedObject') or {}).get('kind', '').lower()}/"
                f"{(e.get('involvedObject') or {}).get('name', '')}"
            ),
            0,
        ),
        ("Message", "string", _field(".message"), 0),
    ],
}

_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")


def evaluate(obj: Any, path: str) -> str:
    """A kubectl-style JSONPath subset; several results are joined with commas, none give ``""``."""
    values: list[Any] = [obj]
    for match in _STEP.finditer(path.strip().lstrip("{").rstrip("}")):
        name, index, filter_field, filter_value = match.groups()
        next_values: list[Any] = []
        for value in values:
            if name is not None and isinstance(value, dict) and name in value:
                next_values.append(value[name])
            elif index == "*" and isinstance(value, list):
                next_values.extend(value)
            elif index is not None and index != "*" and isinstance(value, list) and int(index) < len(value):
                next_values.append(value[int(index)])
            elif filter_field is not None and isinstance(value, list):
                next_values.extend(
                    item
                    for item in value
                    if isinstance(item, dict) and str(evaluate(item, "." + filter_field)) == filter_value
                )
        values = next_values
    return ",".join(str(v) for v in values if v is not None)


def _columns(resource_type: ResourceType) -> list[Column]:
    if resource_type.custom:
        columns: list[Column] = []
        for spec in resource_type.printer_columns:
            path, kind = spec.get("jsonPath", ""), spec.get("type", "string")
            cell = (
                (lambda o, p=path: age_of(evaluate(o, p) or None))
                if kind == "date"
                else (lambda o, p=path: evaluate(o, p))
            )
            columns.append(
                (spec.get("name", ""), "string" if kind == "date" else kind, cell, int(spec.get("priority", 0)))
            )
        return columns or [("Age", "string", _age, 0)]
    return _BUILTIN_COLUMNS.get(resource_type.storage_key, [("Age", "string", _age, 0)])


def table(resource_type: ResourceType, objects: list[Object], resource_version: str, *, headers: bool = True) -> Object:
    """A ``meta.k8s.io/v1`` Table of ``objects``; ``headers=False`` omits columnDefinitions (watch events)."""
    columns = _columns(resource_type)
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}]
    definitions += [
        {"name": name, "type": kind, "format": "", "description": name, "priority": priority}
        for name, kind, _, priority in columns
    ]
    rows = []
    for obj in objects:
        metadata = obj.get("metadata") or {}
        cells = [metadata.get("name", "")] + [cell(obj) for _, _, cell, _ in columns]
        rows.append(
            {
                "cells": cells,
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata},
            }
        )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions if headers else [],
        "rows": rows,
    }

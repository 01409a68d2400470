"""Whether an observed object has the shape the classifiers read: each field they look at, if
present, of the JSON type the API defines.

A missing field is not malformed (controllers write status in several steps; ``conditions``
reads it as "not set"), and neither is an unknown condition type (ignored, as Kueue and the
autoscaler ignore types they do not own). A field of the wrong type - ``status.conditions`` a
string, ``exitCode`` a string - is what a broken controller, proxy or API server would send; the
classifiers would read it as "not set" and wait forever, so :func:`find_malformed` names it
instead and the trigger ends the try with ``malformed_answer``.

Field types are the OpenAPI types of ``core/v1`` Pod (``PodStatus``, ``ContainerStatus``),
``metav1.Condition`` / ``ObjectMeta``, Node (``NodeSpec``, ``NodeStatus``), Kueue ``v1beta2``
Workload, ``batch/v1`` Job (``JobStatus``) and cluster-autoscaler ``autoscaling.x-k8s.io/v1``
ProvisioningRequest.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from airflow_provider_gang.reservation.observed import Observed

Rule = tuple[str, type]
"""``(path, JSON type)``; ``[]`` in a path stands for every item of a list."""

_JSON_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "a boolean"}

_METADATA: tuple[Rule, ...] = (
    ("metadata", dict),
    ("metadata.name", str),
    ("metadata.labels", dict),
    ("metadata.annotations", dict),
    ("metadata.deletionTimestamp", str),
)
_CONDITIONS: tuple[Rule, ...] = (
    ("status", dict),
    ("status.conditions", list),
    ("status.conditions[]", dict),
    ("status.conditions[].type", str),
    ("status.conditions[].status", str),
    ("status.conditions[].reason", str),
    ("status.conditions[].message", str),
)


def _container_statuses(field: str) -> tuple[Rule, ...]:
    return (
        (f"status.{field}", list),
        (f"status.{field}[]", dict),
        (f"status.{field}[].state", dict),
        (f"status.{field}[].state.terminated", dict),
        (f"status.{field}[].state.terminated.exitCode", int),
        (f"status.{field}[].state.waiting", dict),
        (f"status.{field}[].state.waiting.reason", str),
    )


PROVISIONING_REQUEST_RULES: tuple[Rule, ...] = _METADATA + _CONDITIONS
WORKLOAD_RULES: tuple[Rule, ...] = (
    _METADATA
    + _CONDITIONS
    + (
        ("spec", dict),
        ("spec.active", bool),
        ("status.admissionChecks", list),
        ("status.admissionChecks[]", dict),
        ("status.admissionChecks[].state", str),
        ("status.admission", dict),
        ("status.admission.podSetAssignments", list),
        ("status.admission.podSetAssignments[]", dict),
        ("status.admission.podSetAssignments[].count", int),
        ("status.clusterName", str),
    )
)
JOB_RULES: tuple[Rule, ...] = (
    _METADATA
    + _CONDITIONS
    + (
        ("status.ready", int),
        ("status.succeeded", int),
        ("status.failed", int),
    )
)
POD_GROUP_RULES: tuple[Rule, ...] = (
    _METADATA + _CONDITIONS + (("spec", dict), ("spec.schedulingPolicy", dict), ("spec.schedulingPolicy.gang", dict))
)
POD_RULES: tuple[Rule, ...] = (
    _METADATA
    + _CONDITIONS
    + (
        ("spec", dict),
        ("spec.nodeName", str),
        ("spec.nodeSelector", dict),
        ("spec.schedulingGates", list),
        ("spec.schedulingGates[]", dict),
        ("spec.schedulingGates[].name", str),
        ("status.phase", str),
        ("status.reason", str),
        ("status.message", str),
        ("status.startTime", str),
    )
    + _container_statuses("containerStatuses")
    + _container_statuses("initContainerStatuses")
)
NODE_RULES: tuple[Rule, ...] = (
    _METADATA
    + _CONDITIONS
    + (
        ("spec", dict),
        ("spec.unschedulable", bool),
        ("spec.taints", list),
        ("spec.taints[]", dict),
        ("spec.taints[].key", str),
        ("spec.taints[].effect", str),
        ("status.allocatable", dict),
    )
)


def _values(value: Any, steps: Sequence[str]) -> Iterator[tuple[str, Any]]:
    """Every ``(concrete path, value)`` that ``steps`` reaches in ``value``; absent parts yield nothing,
    and a part of the wrong type is the rule of its own path's business."""
    if not steps:
        yield "", value
        return
    step, rest = steps[0], steps[1:]
    name, each = (step[:-2], True) if step.endswith("[]") else (step, False)
    if not isinstance(value, Mapping) or value.get(name) is None:
        return
    child = value[name]
    if not each:
        for path, found in _values(child, rest):
            yield f"{name}{'.' + path if path else ''}", found
        return
    if not isinstance(child, list):
        return
    for index, item in enumerate(child):
        for path, found in _values(item, rest):
            yield f"{name}[{index}]{'.' + path if path else ''}", found


def _is(value: Any, expected: type) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is dict:  # a JSON object: decoded as a dict, or held by a watch cache as a read-only Mapping
        return isinstance(value, Mapping)
    return isinstance(value, expected)


def find_malformed(obj: Mapping[str, Any], rules: Sequence[Rule]) -> str | None:
    """The first field of ``obj`` whose type breaks ``rules``, as ``"<path> is <type>, not <type>"``."""
    if not isinstance(obj, Mapping):
        return f"the object is {type(obj).__name__}, not an object"
    for path, expected in rules:
        for concrete, value in _values(obj, path.split(".")):
            if value is not None and not _is(value, expected):
                return (
                    f"{concrete} is {_JSON_TYPE_NAMES.get(type(value), type(value).__name__)}, "
                    f"not {_JSON_TYPE_NAMES[expected]}"
                )
    return None


def _describe(kind: str, obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return f"{kind} {metadata.get('namespace') or '?'}/{metadata.get('name') or '?'}"


RULES_BY_KIND: dict[str, tuple[Rule, ...]] = {
    "ProvisioningRequest": PROVISIONING_REQUEST_RULES,
    "Workload": WORKLOAD_RULES,
    "PodGroup": POD_GROUP_RULES,
    "Pod": POD_RULES,
    "Node": NODE_RULES,
    "Job": JOB_RULES,
}


def malformed(kind: str, obj: Mapping[str, Any]) -> str | None:
    """``"<Kind> <namespace>/<name>: <problem>"`` if ``obj`` (of ``kind``, a key of
    :data:`RULES_BY_KIND`) is malformed, else ``None``."""
    problem = find_malformed(obj, RULES_BY_KIND[kind])
    return None if problem is None else f"{_describe(kind, obj)}: {problem}"


def malformed_in(observed: Observed) -> str | None:
    """The first malformed object of ``observed``, named with its field (``None``: all readable)."""
    candidates: list[tuple[str, Mapping[str, Any]]] = []
    if observed.provisioning_request is not None:
        candidates.append(("ProvisioningRequest", observed.provisioning_request))
    if observed.workload is not None:
        candidates.append(("Workload", observed.workload))
    if observed.pod_group is not None:
        candidates.append(("PodGroup", observed.pod_group))
    if observed.job is not None:
        candidates.append(("Job", observed.job))
    candidates += [("Pod", pod) for pod in observed.pods]
    return next((problem for kind, obj in candidates if (problem := malformed(kind, obj)) is not None), None)

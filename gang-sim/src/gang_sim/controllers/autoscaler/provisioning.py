"""ProvisioningRequest vocabulary and pure decisions (OSS cluster-autoscaler and GKE DWS).

Names, reasons and messages are the upstream ones (reference section 1.5, ``provisioningrequest/
conditions/conditions.go``); the order of states is tabled in reference 7.A and 7.B.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

PROVISIONING_REQUESTS = "autoscaling.x-k8s.io/v1/provisioningrequests"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
QUEUED_PROVISIONING = "queued-provisioning.gke.io"
SUPPORTED_CLASSES = (CHECK_CAPACITY, BEST_EFFORT_ATOMIC, QUEUED_PROVISIONING)

CONSUME_ANNOTATIONS = (
    "autoscaling.x-k8s.io/consume-provisioning-request",
    "cluster-autoscaler.kubernetes.io/consume-provisioning-request",  # deprecated, still honoured by CA
)

ACCEPTED_MESSAGE = "ProvisioningRequest is accepted by ClusterAutoscaler"
CAPACITY_FOUND_MESSAGE = "Capacity is found in the cluster"
CAPACITY_NOT_FOUND_MESSAGE = "Capacity is not found, CA will try to find it later."
NO_RETRY_MESSAGE = "CA could not find requested capacity"
RESERVATION_EXPIRED_MESSAGE = "Capacity reservation time is expired"
BOOKING_CONSUMED_MESSAGE = "Capacity booking consumed: all pods scheduled"
EXPIRED_MESSAGE = "ProvisioningRequest is expired"
EXPIRY_SECONDS = 7 * 24 * 3600  # defaultExpirationTime
TERMINAL_TTL_SECONDS = 7 * 24 * 3600  # defaultTerminalProvReqTTL
DEFAULT_MAX_RUN_DURATION_SECONDS = 604800  # GKE: 7 days


class State(Enum):
    """Reference 7.A/7.B states, derived from conditions (precedence: terminal ones first)."""

    NEW = "New"
    ACCEPTED = "Accepted"
    PENDING_RETRY = "PendingRetry"
    PROVISIONED = "Provisioned"
    BOOKING_EXPIRED = "BookingExpired"
    REVOKED = "CapacityRevoked"
    FAILED = "Failed"


def _status_of(request: Mapping[str, Any], condition_type: str) -> str | None:
    for item in (request.get("status") or {}).get("conditions") or []:
        if item.get("type") == condition_type:
            return str(item.get("status"))
    return None


def classify(request: Mapping[str, Any]) -> State:
    if _status_of(request, "Failed") == "True":
        return State.FAILED
    if _status_of(request, "CapacityRevoked") == "True":
        return State.REVOKED
    if _status_of(request, "BookingExpired") == "True":
        return State.BOOKING_EXPIRED
    provisioned = _status_of(request, "Provisioned")
    if provisioned == "True":
        return State.PROVISIONED
    if provisioned == "False":
        return State.PENDING_RETRY
    if _status_of(request, "Accepted") == "True":
        return State.ACCEPTED
    return State.NEW


def consumed_request(pod: Mapping[str, Any]) -> str | None:
    """The name of the ProvisioningRequest a pod consumes (new or deprecated annotation), if any."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    for key in CONSUME_ANNOTATIONS:
        if annotations.get(key):
            return str(annotations[key])
    return None


def retry_delay(attempts: int, *, initial: float, maximum: float) -> float:
    """``injector`` backoff: initial, doubled per failed attempt, capped (1m, 2m, 4m, 8m, 10m, ...)."""
    return float(min(maximum, initial * 2 ** max(0, attempts - 1)))


@dataclass(frozen=True)
class PodSet:
    """One podSet expanded: the PodTemplate's pod spec and how many copies are requested."""

    template_name: str
    spec: Mapping[str, Any]
    count: int


def missing_templates(request: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any]]) -> list[str]:
    names = [item["podTemplateRef"]["name"] for item in (request.get("spec") or {}).get("podSets") or []]
    return [name for name in names if name not in templates]


def pod_sets(request: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any]]) -> list[PodSet]:
    """Expand ``spec.podSets`` with the referenced PodTemplates (all must exist)."""
    result = []
    for item in (request.get("spec") or {}).get("podSets") or []:
        name = item["podTemplateRef"]["name"]
        template = templates[name].get("template") or {}
        result.append(PodSet(name, template.get("spec") or {}, int(item.get("count", 1))))
    return result


def requested_pods(request: Mapping[str, Any]) -> int:
    return sum(int(item.get("count", 1)) for item in (request.get("spec") or {}).get("podSets") or [])


def max_run_duration(request: Mapping[str, Any]) -> float:
    """``parameters.maxRunDurationSeconds`` (GKE; default and maximum 7 days); ValueError if malformed."""
    value = ((request.get("spec") or {}).get("parameters") or {}).get("maxRunDurationSeconds")
    if value is None:
        return float(DEFAULT_MAX_RUN_DURATION_SECONDS)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"parameters.maxRunDurationSeconds must be a number of seconds, got {value!r}") from None
    if not 0 < seconds <= DEFAULT_MAX_RUN_DURATION_SECONDS:
        raise ValueError(f"parameters.maxRunDurationSeconds must be in (0, {DEFAULT_MAX_RUN_DURATION_SECONDS}]")
    return seconds


def is_no_retry(request: Mapping[str, Any]) -> bool:
    return ((request.get("spec") or {}).get("parameters") or {}).get("noRetry") == "true"

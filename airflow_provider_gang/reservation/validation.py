"""Field checks behind :class:`reservation.spec.GangSpec` (which calls them in field order); each
raises :class:`GangSpecError` naming the field and the fix.

Limits come from the real API: ProvisioningRequest ``spec.parameters`` has at most 100 entries of
at most 255 chars and ``provisioningClassName`` is a DNS subdomain (CRD
``autoscaling.x-k8s.io_provisioningrequests.yaml``); GKE's ``maxRunDurationSeconds`` is at most 7
days; Kueue's ``job-min-parallelism`` must be ``0 < min < parallelism`` (webhook-validated).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

from airflow_provider_gang.reservation import naming, quantity
from airflow_provider_gang.reservation.errors import GangSpecError

CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
QUEUED_PROVISIONING = "queued-provisioning.gke.io"
KNOWN_PROVISIONING_CLASSES = (CHECK_CAPACITY, BEST_EFFORT_ATOMIC, QUEUED_PROVISIONING)
KNOWN_PARAMETERS: dict[str, frozenset[str]] = {
    CHECK_CAPACITY: frozenset({"noRetry", "processorInstance"}),
    BEST_EFFORT_ATOMIC: frozenset(),
    QUEUED_PROVISIONING: frozenset({"maxRunDurationSeconds"}),
}
"""``spec.parameters`` keys each class is known to read (cluster-autoscaler ``provisioningrequest``
processors; GKE's Dynamic Workload Scheduler documentation); others are passed on unread."""


def unknown_parameters(provisioning_class: str | None, parameters: Mapping[str, str]) -> str | None:
    """A warning naming the ``parameters`` keys no controller of ``provisioning_class`` is known to
    read (and the keys it does read), or ``None``. Not an error: a newer controller may read them."""
    known = KNOWN_PARAMETERS.get(provisioning_class or "")
    if known is None:
        return None
    unknown = sorted(set(parameters) - known)
    if not unknown:
        return None
    listed = ", ".join(sorted(known)) or "none"
    return f"provisioning_parameters {unknown} are not read by {provisioning_class} (known keys: {listed})"


MAX_PARAMETERS = 100
MAX_PARAMETER_VALUE_LENGTH = 255
MAX_RUN_DURATION_SECONDS = 604800  # GKE DWS: 7 days, the default and the maximum.

EnumT = TypeVar("EnumT", bound=Enum)


def enum_value(enum: type[EnumT], value: object, field: str) -> EnumT:
    """``enum(value)``, or a :class:`GangSpecError` listing the allowed values."""
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(repr(member.value) for member in enum)
        raise GangSpecError(field, f"{value!r} is not one of {allowed}") from None


def check_name(name: str, namespace: str) -> None:
    if not isinstance(name, str) or not naming.is_dns_1035_label(name):
        raise GangSpecError(
            "name",
            f"{name!r} is not a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, "
            "<= 63 chars); derive it with reservation.naming.gang_name()",
        )
    if len(name) > naming.GANG_NAME_MAX:
        raise GangSpecError("name", f"{name!r} is longer than {naming.GANG_NAME_MAX} chars; member names add '-<rank>'")
    if not isinstance(namespace, str) or not naming.is_dns_label(namespace):
        raise GangSpecError("namespace", f"{namespace!r} is not a DNS-1123 label (e.g. 'ml-training')")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_sizes(size: int, min_size: int | None, original_size: int | None) -> None:
    if not _is_int(size) or size < 1:
        raise GangSpecError("size", f"must be a whole number >= 1, got {size!r}")
    if min_size is not None:
        if not _is_int(min_size) or min_size < 1:
            raise GangSpecError("min_size", f"must be a whole number >= 1 or None, got {min_size!r}")
        if min_size > size:
            raise GangSpecError("min_size", f"{min_size} is larger than size={size}; use min_size <= size")
    if original_size is not None and (not _is_int(original_size) or original_size < size):
        raise GangSpecError("original_size", f"must be a whole number >= size={size}, got {original_size!r}")


def check_resources(gpus: int, gpu_resource: str, cpu: str | None, memory: str | None) -> None:
    if not _is_int(gpus) or gpus < 0:
        raise GangSpecError("gpus", f"must be a whole number >= 0, got {gpus!r}")
    if gpus > 0 and not _is_extended_resource(gpu_resource):
        raise GangSpecError(
            "gpu_resource",
            f"gpus={gpus} requested but {gpu_resource!r} is not a GPU resource name; "
            "use a vendor resource such as 'nvidia.com/gpu' or 'amd.com/gpu'",
        )
    for field, value in (("cpu", cpu), ("memory", memory)):
        if value is None:
            continue
        try:
            amount = quantity.parse_quantity(value)
        except quantity.QuantityError as error:
            raise GangSpecError(field, f"{error}") from None
        if amount <= 0:
            raise GangSpecError(field, f"must be positive, got {value!r}")


def _is_extended_resource(name: object) -> bool:
    """A vendor resource: ``domain/name`` outside ``kubernetes.io`` (how device plugins advertise GPUs)."""
    if not isinstance(name, str) or "/" not in name or not naming.is_qualified_name(name):
        return False
    domain = name.split("/", 1)[0]
    return domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def check_provisioning(provisioning_class: str | None, parameters: Mapping[str, str], mode: str) -> None:
    known = ", ".join(KNOWN_PROVISIONING_CLASSES)
    if provisioning_class is None:
        raise GangSpecError("provisioning_class", f"reservation={mode!r} needs a provisioning class: one of {known}")
    if provisioning_class not in KNOWN_PROVISIONING_CLASSES:
        raise GangSpecError("provisioning_class", f"unknown class {provisioning_class!r}; use one of {known}")
    if not isinstance(parameters, Mapping):
        raise GangSpecError("provisioning_parameters", "must be a mapping of strings to strings")
    if len(parameters) > MAX_PARAMETERS:
        raise GangSpecError(
            "provisioning_parameters", f"{len(parameters)} entries; the ProvisioningRequest CRD allows {MAX_PARAMETERS}"
        )
    for key, value in parameters.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise GangSpecError(
                f"provisioning_parameters[{key!r}]", f"keys and values must be strings, e.g. {key!r}: '{value}'"
            )
        if len(value) > MAX_PARAMETER_VALUE_LENGTH:
            raise GangSpecError(
                f"provisioning_parameters[{key!r}]",
                f"value has {len(value)} chars; the CRD allows {MAX_PARAMETER_VALUE_LENGTH}",
            )
    _check_known_parameters(provisioning_class, parameters)


def _check_known_parameters(provisioning_class: str, parameters: Mapping[str, str]) -> None:
    duration = parameters.get("maxRunDurationSeconds")
    if duration is not None:
        if provisioning_class != QUEUED_PROVISIONING:
            raise GangSpecError(
                "provisioning_parameters['maxRunDurationSeconds']", f"only {QUEUED_PROVISIONING} reads it; remove it"
            )
        if not duration.isdigit() or not 1 <= int(duration) <= MAX_RUN_DURATION_SECONDS:
            raise GangSpecError(
                "provisioning_parameters['maxRunDurationSeconds']",
                f"must be whole seconds 1..{MAX_RUN_DURATION_SECONDS} (7 days), got {duration!r}",
            )
    no_retry = parameters.get("noRetry")
    if no_retry is not None:
        if provisioning_class != CHECK_CAPACITY:
            raise GangSpecError("provisioning_parameters['noRetry']", f"only {CHECK_CAPACITY} reads it; remove it")
        if no_retry not in ("true", "false"):
            raise GangSpecError("provisioning_parameters['noRetry']", f"must be 'true' or 'false', got {no_retry!r}")


def check_queue(queue: str | None) -> None:
    if queue is None:
        raise GangSpecError("queue", "reservation='kueue' needs the name of a Kueue LocalQueue in the namespace")
    if not isinstance(queue, str) or not naming.is_dns_subdomain(queue) or not naming.is_label_value(queue):
        raise GangSpecError("queue", f"{queue!r} is not a valid LocalQueue name (DNS subdomain, <= 63 chars)")


def check_reservation_name(name: str | None, spot: bool, reservation_label: str | None, cloud_name: str) -> None:
    """A Compute Engine reservation name (RFC 1035, <= 63 chars), in the cluster's project; never with
    spot: "You can't consume a reservation to create Spot VMs"
    (https://cloud.google.com/compute/docs/instances/reservations-consume); never with a cloud profile
    that has no ``reservation_label`` (``reservation.cloud``): no node label would select it."""
    if name is None:
        return
    if reservation_label is None:
        raise GangSpecError(
            "reservation_name",
            f"cloud profile {cloud_name!r} has no reservation label to select a reservation's nodes by; "
            "drop use_reservation, or give cloud=CloudProfile(..., reservation_label='<node label>')",
        )
    if not isinstance(name, str) or not naming.is_dns_1035_label(name):
        raise GangSpecError(
            "reservation_name",
            f"{name!r} is not a reservation name (lower-case letters, digits "
            "and '-', starting with a letter, <= 63 chars)",
        )
    if spot:
        raise GangSpecError(
            "reservation_name",
            "a reservation serves on-demand VMs only (Spot VMs cannot consume "
            "one); drop spot=True, or leave the reservation with LeaveReservation(spot=True)",
        )


def check_zone(zone: str | None, strict_zone: bool) -> None:
    if zone is None:
        if strict_zone:
            raise GangSpecError("strict_zone", "strict_zone=True needs a zone; set zone='<zone>' or drop strict_zone")
        return
    if not isinstance(zone, str) or not zone or not naming.is_label_value(zone):
        raise GangSpecError("zone", f"{zone!r} is not a valid zone label value (e.g. 'us-central1-a')")


def check_labels(labels: Mapping[str, Any]) -> None:
    if not isinstance(labels, Mapping):
        raise GangSpecError("labels", "must be a mapping of label keys to label values")
    for key, value in labels.items():
        if not isinstance(key, str) or not naming.is_qualified_name(key):
            raise GangSpecError(f"labels[{key!r}]", "is not a valid label key ('[prefix/]name', name <= 63 chars)")
        if key in naming.RESERVED_LABELS:
            raise GangSpecError(f"labels[{key!r}]", "is set by the provider on every object; choose another key")
        if not isinstance(value, str) or not naming.is_label_value(value):
            raise GangSpecError(
                f"labels[{key!r}]", f"{value!r} is not a valid label value (<= 63 chars of [A-Za-z0-9_.-])"
            )


def check_flag(field: str, value: object) -> None:
    if not isinstance(value, bool):
        raise GangSpecError(field, f"must be True or False, got {value!r}")


def check_master_port(port: object) -> None:
    if not (isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535):
        raise GangSpecError("master_port", f"must be a port number 1..65535, got {port!r}")


WORKLOAD_PREFERRED_TOPOLOGY = (
    "reservation='workload' honours only a required topology: the Workload API's topology constraint "
    "(KEP-5732, a PodGroup's spec.schedulingConstraints.topology) places the whole gang in one domain or "
    "none and has no preferred form; use required_topology, or reservation='gates' or 'kueue' for a preference"
)


def check_topology(required: str | None, preferred: str | None, mode: str) -> None:
    """At most one of ``required_topology`` / ``preferred_topology``, each a label key; a preferred
    one is refused with ``workload`` (:data:`WORKLOAD_PREFERRED_TOPOLOGY`)."""
    if required is not None and preferred is not None:
        raise GangSpecError(
            "preferred_topology",
            f"conflicts with required_topology={required!r}: a gang either requires one domain of a label or "
            "prefers as few as possible; keep one of the two",
        )
    for field, label in (("required_topology", required), ("preferred_topology", preferred)):
        if label is not None and (not isinstance(label, str) or not label or not naming.is_qualified_name(label)):
            raise GangSpecError(
                field,
                f"{label!r} is not a node label key ('[prefix/]name', e.g. "
                "'cloud.google.com/gce-topology-subblock' or 'kubernetes.io/hostname')",
            )
    if preferred is not None and mode == "workload":
        raise GangSpecError("preferred_topology", WORKLOAD_PREFERRED_TOPOLOGY)

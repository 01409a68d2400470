"""What a gang is: :class:`GangSpec`, validated on construction.

A ``GangSpec`` describes one try of a gang: its objects' name and namespace, how many members, the
member pod template, per-member resources, how capacity is reserved and where. It is a frozen
dataclass; build a changed copy with :func:`dataclasses.replace` (the copy is validated again),
which is how fallback steps derive the next try's spec.

Validation (:mod:`reservation.validation`) raises :class:`GangSpecError` naming the field and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from airflow_provider_gang.reservation import cloud, exit_codes, template, validation
from airflow_provider_gang.reservation.checkpoint import Checkpoint
from airflow_provider_gang.reservation.cloud import CloudProfile
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.topology.pins import Placement

__all__ = ["Distributed", "GangSpec", "GangSpecError", "MemberResources", "ReservationMode"]

DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_MASTER_PORT = 29500


class ReservationMode(str, Enum):
    """How capacity for the whole gang is reserved before any member starts.

    - ``provisioning_request``: PodTemplate + ProvisioningRequest; members are created on
      ``Provisioned=True`` with both consume annotations.
    - ``kueue``: a suspended Kueue Job (or plain pod group) in a LocalQueue; Kueue admits all
      members at once (optionally partially, down to ``min_size``).
    - ``gates``: PodTemplate + ProvisioningRequest, and the members are created up front, held by a
      gang-specific scheduling gate, so releasing the gates on ``Provisioned=True`` binds them well
      inside the 10-minute booking window.
    - ``workload``: Kubernetes' own gang scheduling (KEP-4671, ``scheduling.k8s.io/v1beta1``): a
      PodGroup whose gang policy's ``minCount`` is the size, and the members created up front linked
      to it (``spec.schedulingGroup``); the kube-scheduler binds all of them in one cycle or none
      (:mod:`reservation.manifests.pod_group`, :mod:`reservation.pod_group`).
    """

    PROVISIONING_REQUEST = "provisioning_request"
    KUEUE = "kueue"
    GATES = "gates"
    WORKLOAD = "workload"

    @property
    def uses_provisioning_request(self) -> bool:
        return self not in (ReservationMode.KUEUE, ReservationMode.WORKLOAD)


class Distributed(str, Enum):
    """Which rank environment members receive (see :mod:`reservation.manifests.rank_env`)."""

    TORCH = "torch"
    JAX = "jax"


@dataclass(frozen=True)
class MemberResources:
    """Resources of one member, added to every container-0 request and limit.

    ``cpu`` and ``memory`` are Kubernetes quantities (``"4"``, ``"500m"``, ``"16Gi"``) or ``None`` to
    keep what the template says. ``gpus`` is a whole number of ``gpu_resource`` devices.
    """

    gpus: int = 0
    cpu: str | None = None
    memory: str | None = None
    gpu_resource: str = DEFAULT_GPU_RESOURCE


@dataclass(frozen=True)
class GangSpec:
    """One try of a gang. Field by field:

    - ``name``: base name of every object of this try (DNS-1123 label, <= 63 chars); see
      :mod:`reservation.naming` for deriving it from dag/task/run/attempt.
    - ``namespace``: namespace of every object.
    - ``size``: number of members; ``min_size``: the floor for partial admission and for shrinking
      (``None`` means ``size``: all or nothing). ``workload`` mode admits no part of a gang: its
      PodGroup's ``minCount`` is ``size``, and ``min_size`` is only the floor a shrink step may reach.
    - ``pod_template``: the member pod template as a dict: a Pod, PodTemplate, PodTemplateSpec or
      PodSpec; stored normalised to a PodTemplateSpec (:func:`reservation.template.to_pod_template_spec`).
    - ``resources``: per-member GPUs, CPU, memory.
    - ``mode``: :class:`ReservationMode`.
    - ``provisioning_class`` and ``provisioning_parameters``: ProvisioningRequest class and its
      string parameters (e.g. ``{"maxRunDurationSeconds": "86400"}``); required for the modes that
      create a ProvisioningRequest.
    - ``queue``: Kueue LocalQueue name (``kueue`` mode).
    - ``zone`` / ``strict_zone``: zone to place members in (``topology.kubernetes.io/zone``); strict
      means a required node selector, otherwise a preferred node affinity.
    - ``spot``: place members on spot capacity (the ``cloud`` profile's spot label and toleration);
      ``False`` requires nodes without it (on-demand).
    - ``cloud``: the :class:`reservation.cloud.CloudProfile` whose labels and taints place members
      and tell a spot reclaim (default GKE's).
    - ``labels``: extra labels on every object.
    - ``distributed`` / ``master_port``: rank environment and rendezvous port.
    - ``original_size``: the size before any shrink (``None`` means ``size``), exposed to members as
      ``GANG_ORIGINAL_SIZE``.
    - ``reservation_name``: a specific reservation the members must consume (a required node
      affinity on the profile's ``reservation_label``, GKE's ``cloud.google.com/reservation-name``,
      :mod:`reservation.manifests.pods`), or ``None``. Reservations serve on-demand VMs only, so it
      cannot be combined with ``spot``; a profile without a reservation label refuses it.
    - ``retry_on_exit_codes`` / ``fail_on_exit_codes``: the exit-code policy
      (:mod:`reservation.exit_codes`), frozensets of codes 1..255 that share none.
    - ``checkpoint``: where every try of the run saves and whether this one resumes
      (:class:`reservation.checkpoint.Checkpoint`; ``None``: no checkpoint environment).
    - ``required_topology`` / ``preferred_topology``: a node label (``cloud.google.com/gce-topology-
      subblock``) whose one domain holds every member, or none starts / which the members span as
      few domains of as possible (at most one of the two; ``workload`` honours only the required one).
    - ``placement``: the domains this try's members are pinned to (``gates`` and
      ``provisioning_request`` with a topology: :class:`reservation.topology.pins.Placement`, chosen
      by the operator before the gang's objects are created); ``None`` otherwise.
    """

    name: str
    namespace: str
    size: int
    pod_template: Mapping[str, Any]
    mode: ReservationMode = ReservationMode.PROVISIONING_REQUEST
    min_size: int | None = None
    resources: MemberResources = field(default_factory=MemberResources)
    provisioning_class: str | None = None
    provisioning_parameters: Mapping[str, str] = field(default_factory=dict)
    queue: str | None = None
    zone: str | None = None
    strict_zone: bool = False
    spot: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    distributed: Distributed | None = None
    master_port: int = DEFAULT_MASTER_PORT
    original_size: int | None = None
    reservation_name: str | None = None
    retry_on_exit_codes: frozenset[int] = frozenset()
    fail_on_exit_codes: frozenset[int] = frozenset()
    checkpoint: Checkpoint | None = None
    cloud: CloudProfile = cloud.GKE
    required_topology: str | None = None
    preferred_topology: str | None = None
    placement: Placement | None = None

    def __post_init__(self) -> None:
        # Accept enum values given as plain strings (e.g. from serialized trigger kwargs).
        if not isinstance(self.mode, ReservationMode):
            object.__setattr__(self, "mode", validation.enum_value(ReservationMode, self.mode, "mode"))
        if self.distributed is not None and not isinstance(self.distributed, Distributed):
            object.__setattr__(self, "distributed", validation.enum_value(Distributed, self.distributed, "distributed"))
        object.__setattr__(self, "cloud", cloud.profile_of(self.cloud))
        object.__setattr__(self, "pod_template", template.to_pod_template_spec(self.pod_template))
        for codes in ("retry_on_exit_codes", "fail_on_exit_codes"):
            object.__setattr__(self, codes, exit_codes.as_code_set(getattr(self, codes), codes))
        self._validate()

    def _validate(self) -> None:
        """Check every field; the first problem found is raised as a :class:`GangSpecError`."""
        validation.check_name(self.name, self.namespace)
        validation.check_sizes(self.size, self.min_size, self.original_size)
        resources = self.resources
        validation.check_resources(resources.gpus, resources.gpu_resource, resources.cpu, resources.memory)
        template.check_pod_template(self.pod_template, gpu_resource=resources.gpu_resource, gpus=resources.gpus)
        if self.mode.uses_provisioning_request:
            validation.check_provisioning(self.provisioning_class, self.provisioning_parameters, self.mode.value)
        elif self.provisioning_parameters:
            raise GangSpecError("provisioning_parameters", "only modes with a ProvisioningRequest use it; remove it")
        if self.mode is ReservationMode.WORKLOAD and self.provisioning_class is not None:
            raise GangSpecError(
                "provisioning_class", "reservation='workload' creates no ProvisioningRequest; remove it"
            )
        if self.mode.value == "kueue":
            validation.check_queue(self.queue)
        elif self.queue is not None:
            raise GangSpecError("queue", "only used by reservation='kueue'; remove it or switch the mode")
        validation.check_flag("strict_zone", self.strict_zone)
        validation.check_flag("spot", self.spot)
        validation.check_zone(self.zone, self.strict_zone)
        validation.check_reservation_name(
            self.reservation_name, self.spot, self.cloud.reservation_label, self.cloud.name
        )
        validation.check_topology(self.required_topology, self.preferred_topology, self.mode.value)
        self._check_placement()
        exit_codes.check_policy(self.retry_on_exit_codes, self.fail_on_exit_codes)
        validation.check_labels(self.labels)
        validation.check_master_port(self.master_port)

    def _check_placement(self) -> None:
        if self.placement is None:
            return
        if self.mode not in (ReservationMode.GATES, ReservationMode.PROVISIONING_REQUEST):
            raise GangSpecError(
                "placement", f"only gates and provisioning_request pin members, not {self.mode.value!r}"
            )
        if self.placement.label != self.topology_label:
            raise GangSpecError(
                "placement", f"pins {self.placement.label!r}, but the gang's topology is {self.topology_label!r}"
            )

    @property
    def topology_label(self) -> str | None:
        """The node label of the gang's topology, required or preferred (``None``: none)."""
        return self.required_topology or self.preferred_topology

    @property
    def floor(self) -> int:
        """The smallest acceptable gang: ``min_size`` or, when unset, ``size``."""
        return self.size if self.min_size is None else self.min_size

    @property
    def size_before_shrink(self) -> int:
        """``original_size`` or, when unset, ``size``."""
        return self.size if self.original_size is None else self.original_size

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible values (for trigger kwargs and XCom); :meth:`from_dict` inverts it."""
        return {
            "name": self.name,
            "namespace": self.namespace,
            "size": self.size,
            "pod_template": _plain(self.pod_template),
            "mode": self.mode.value,
            "min_size": self.min_size,
            "resources": {
                "gpus": self.resources.gpus,
                "cpu": self.resources.cpu,
                "memory": self.resources.memory,
                "gpu_resource": self.resources.gpu_resource,
            },
            "provisioning_class": self.provisioning_class,
            "provisioning_parameters": dict(self.provisioning_parameters),
            "queue": self.queue,
            "zone": self.zone,
            "strict_zone": self.strict_zone,
            "spot": self.spot,
            "labels": dict(self.labels),
            "distributed": None if self.distributed is None else self.distributed.value,
            "master_port": self.master_port,
            "original_size": self.original_size,
            "reservation_name": self.reservation_name,
            "retry_on_exit_codes": sorted(self.retry_on_exit_codes),
            "fail_on_exit_codes": sorted(self.fail_on_exit_codes),
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_dict(),
            "cloud": self.cloud.to_dict(),
            "required_topology": self.required_topology,
            "preferred_topology": self.preferred_topology,
            "placement": None if self.placement is None else self.placement.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GangSpec:
        """Inverse of :meth:`to_dict`; validates like the constructor."""
        values = dict(data)
        resources = values.pop("resources", None) or {}
        distributed = values.pop("distributed", None)
        checkpoint = values.pop("checkpoint", None)
        placement = values.pop("placement", None)
        values["cloud"] = cloud.profile_of(values.get("cloud") or cloud.GKE)
        return cls(
            checkpoint=None if checkpoint is None else Checkpoint.from_dict(checkpoint),
            placement=None if placement is None else Placement.from_dict(placement),
            resources=MemberResources(**resources),
            distributed=None if distributed is None else Distributed(distributed),
            **values,
        )


def _plain(value: Any) -> Any:
    """Deep copy of nested mappings and sequences as dicts and lists."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value

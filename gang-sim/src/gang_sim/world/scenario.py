"""Cluster scenarios: what the simulated cluster looks like and what happens to it over time.

A scenario is a YAML document (see ``gang_sim/world/scenarios/*.yaml`` for the named ones)::

    name: demo
    description: two zones, GPUs scarce at first
    cloud: gke                       # gke|eks|karpenter|aks: spot labels, taints (:mod:`.node_clouds`)
    seed: 7                          # seeds the controllers' random source (node names, jitter)
    zones:                           # per-zone GPU quota (absent zone = unlimited)
      us-central1-a: {gpuQuota: 8}
    nodePools:
    - name: l4-a                     # DNS-1123 label
      zone: us-central1-a
      gpuType: nvidia-l4             # label cloud.google.com/gke-accelerator (omit for CPU pools)
      gpusPerNode: 4                 # nvidia.com/gpu capacity
      cpu: "48"                      # quantity strings, as in a Node's capacity
      memory: 192Gi
      labels: {team: ml}
      taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
      minNodes: 0
      maxNodes: 8
      initialNodes: 1
      provisioningDelaySeconds: 90   # node becomes Ready this long after the scale-up decision
      spot: false                    # label cloud.google.com/gke-spot=true when true (the cloud's own)
      cloud: gke                     # this pool's cloud, default the scenario's
      queuedProvisioning: false      # scales only through queued-provisioning.gke.io requests
      reservation: null              # a specific reservation's name: nodes labelled
                                     # cloud.google.com/reservation-name; maxNodes = its VMs
      topology: {block: b1, subblock: b1-r1}  # GKE's gce-topology-block/-subblock labels on every node,
                                     # gce-topology-host = the node's name (:mod:`.node_topology`)
    autoscaler:
      scanIntervalSeconds: 10        # CA --scan-interval
      incrementalNodesPerMinute: 1   # how fast ordinary pending pods get nodes (the no-gang baseline)
      scaleDownUnneededSeconds: 600  # --scale-down-unneeded-time
      initialBackoffSeconds: 60      # --provisioning-request-initial-backoff-time
      maxBackoffSeconds: 600         # --provisioning-request-max-backoff-time
      bookingSeconds: 600            # defaultReservationTime
      queuedProvisioningDelaySeconds: 0
    kueue:
      waitForPodsReadyTimeoutSeconds: 1800
      requeueBaseSeconds: 60
      requeueMaxSeconds: 3600
      requeueLimit: null             # null = requeue forever
    localProcessImages: ["python:*"]  # fnmatch globs: images run as local subprocesses by the kubelet
    featureGates:                    # alpha gates of the control plane (both backends), default off
      TopologyAwareWorkloadScheduling: true   # PodGroup topology constraints (KEP-5732)
    objects:                         # manifests created at start (validated: scenario_objects)
    - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: l4}, spec: {}}
    events:                          # timed events, ``at`` in simulated seconds since start
    - {at: 0, until: 600, type: zoneSaturated, zone: us-central1-a}
    - {at: 900, type: quotaChange, zone: us-central1-a, gpuQuota: 16}
    - {at: 1800, type: nodePoolDeleted, pool: l4-a}
    preemptions:                     # spot termination notices (:mod:`.scenario_preemptions`)
    - {at: 600, pool: l4-a, count: 1, noticeSeconds: 30, podGracePeriodSeconds: 15}

Loading validates every field and raises :class:`ScenarioError` naming the offending field path
(``nodePools[1].gpusPerNode``), so a bad file is rejected with a message a user can act on.
Defaults follow the upstream flag defaults cited above. ``docs/emulator.md`` documents the format
field by field for users.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gang_sim.apiserver.feature_gates import GUARDED_KINDS
from gang_sim.world import images, node_clouds
from gang_sim.world.node_topology import PoolTopology, parse_pool_topology
from gang_sim.world.scenario_fields import Fields
from gang_sim.world.scenario_fields import (
    ScenarioError as ScenarioError,  # re-exported: the public name
)
from gang_sim.world.scenario_objects import check_objects
from gang_sim.world.scenario_preemptions import PreemptionSpec, parse_preemption

SCENARIO_DIRECTORY = Path(__file__).with_name("scenarios")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
EVENT_TYPES = ("zoneSaturated", "quotaChange", "nodePoolDeleted")


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def to_api(self) -> dict[str, str]:
        body = {"key": self.key, "effect": self.effect}
        if self.value:
            body["value"] = self.value
        return body


@dataclass(frozen=True)
class NodePool:
    name: str
    zone: str
    cpu: str
    memory: str
    gpu_type: str | None = None
    gpus_per_node: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    min_nodes: int = 0
    max_nodes: int = 10
    initial_nodes: int = 0
    provisioning_delay_seconds: float = 60.0
    spot: bool = False
    queued_provisioning: bool = False
    reservation: str | None = None
    cloud: str = node_clouds.DEFAULT_CLOUD
    topology: PoolTopology | None = None
    """GKE's topology labels of the pool's nodes (:mod:`.node_topology`)."""


@dataclass(frozen=True)
class AutoscalerSettings:
    scan_interval_seconds: float = 10.0
    incremental_nodes_per_minute: float = 1.0
    scale_down_unneeded_seconds: float = 600.0
    initial_backoff_seconds: float = 60.0
    max_backoff_seconds: float = 600.0
    booking_seconds: float = 600.0
    queued_provisioning_delay_seconds: float = 0.0


@dataclass(frozen=True)
class KueueSettings:
    wait_for_pods_ready_timeout_seconds: float = 1800.0
    requeue_base_seconds: float = 60.0
    requeue_max_seconds: float = 3600.0
    requeue_limit: int | None = None


@dataclass(frozen=True)
class TimedEvent:
    """``zoneSaturated`` (zone, until), ``quotaChange`` (zone, gpu_quota) or ``nodePoolDeleted`` (pool)."""

    at: float
    type: str
    zone: str | None = None
    pool: str | None = None
    until: float | None = None
    gpu_quota: int | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    node_pools: tuple[NodePool, ...]
    description: str = ""
    seed: int = 0
    zone_gpu_quota: Mapping[str, int] = field(default_factory=dict)
    autoscaler: AutoscalerSettings = AutoscalerSettings()
    kueue: KueueSettings = KueueSettings()
    local_process_images: tuple[str, ...] = ()
    events: tuple[TimedEvent, ...] = ()
    objects: tuple[Mapping[str, Any], ...] = ()
    """Manifests created when the control plane starts (:mod:`.scenario_objects`)."""
    preemptions: tuple[PreemptionSpec, ...] = ()
    """Spot termination notices (:mod:`.scenario_preemptions`)."""
    feature_gates: frozenset[str] = frozenset()
    """Alpha feature gates turned on in the control plane (``gang_sim.apiserver.feature_gates``)."""

    def pool(self, name: str) -> NodePool:
        for pool in self.node_pools:
            if pool.name == name:
                return pool
        raise KeyError(name)


def named_scenarios() -> list[str]:
    """Names of the scenarios shipped with the package (``gang-sim scenarios``)."""
    return sorted(path.stem for path in SCENARIO_DIRECTORY.glob("*.yaml"))


def load_scenario(name_or_path: str) -> Scenario:
    """Load a shipped scenario by name, or a scenario file by path."""
    path = Path(name_or_path)
    if not path.suffix and not path.is_file():  # a bare name: a shipped scenario, even beside a folder of that name
        path = SCENARIO_DIRECTORY / f"{name_or_path}.yaml"
        if not path.exists():
            raise ScenarioError("name", f"no scenario named {name_or_path!r}; known: {', '.join(named_scenarios())}")
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ScenarioError("file", f"cannot read {path}: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise ScenarioError("file", f"{path} is not valid YAML: {error}") from error
    return parse_scenario(document, default_name=path.stem)


def parse_scenario(document: object, *, default_name: str = "scenario") -> Scenario:
    """Build a :class:`Scenario` from a decoded YAML document, validating every field."""
    root = Fields(document, "")
    cloud = _cloud(root.string("cloud", default=node_clouds.DEFAULT_CLOUD), "cloud")
    pools_raw = root.list("nodePools", required=True)
    pools = tuple(_parse_pool(item, f"nodePools[{index}]", cloud) for index, item in enumerate(pools_raw))
    if not pools:
        raise ScenarioError("nodePools", "at least one node pool is required")
    names = [pool.name for pool in pools]
    for index, name in enumerate(names):
        if names.index(name) != index:
            raise ScenarioError(f"nodePools[{index}].name", f"duplicate node pool name {name!r}")
    zones = root.mapping("zones")
    quota = {zone: Fields(value, f"zones.{zone}").integer("gpuQuota", required=True) for zone, value in zones.items()}
    scenario = Scenario(
        name=root.string("name", default=default_name),
        description=root.string("description", default=""),
        seed=root.integer("seed", default=0),
        node_pools=pools,
        zone_gpu_quota=quota,
        autoscaler=_parse_autoscaler(root.child("autoscaler")),
        kueue=_parse_kueue(root.child("kueue")),
        local_process_images=_image_patterns(root.list("localProcessImages")),
        events=tuple(_parse_event(item, f"events[{index}]", names) for index, item in enumerate(root.list("events"))),
        objects=check_objects(root.list("objects")),
        preemptions=tuple(
            parse_preemption(item, f"preemptions[{index}]", names)
            for index, item in enumerate(root.list("preemptions"))
        ),
        feature_gates=_feature_gates(root.child("featureGates")),
    )
    root.reject_unknown()
    return scenario


def _feature_gates(fields: Fields) -> frozenset[str]:
    """The gates set ``true``; a gate the emulator does not model is refused, naming the ones it does."""
    enabled = set()
    for gate in GUARDED_KINDS:
        if fields.boolean(gate, default=False):
            enabled.add(gate)
    try:
        fields.reject_unknown()
    except ScenarioError as error:
        raise ScenarioError(
            error.field, f"unknown feature gate; modelled: {', '.join(sorted(GUARDED_KINDS))}"
        ) from None
    return frozenset(enabled)


def _image_patterns(items: list[object]) -> tuple[str, ...]:
    patterns = []
    for index, item in enumerate(items):
        try:
            patterns.append(images.check_pattern(item))
        except images.ImagePatternError as error:
            raise ScenarioError(f"localProcessImages[{index}]", str(error)) from None
    return tuple(patterns)


def _cloud(name: str, path: str) -> str:
    if name not in node_clouds.CLOUDS:
        raise ScenarioError(path, f"{name!r} is no cloud; use one of {', '.join(node_clouds.CLOUDS)}")
    return name


def _parse_pool(item: object, path: str, cloud: str = node_clouds.DEFAULT_CLOUD) -> NodePool:
    fields = Fields(item, path)
    name = fields.string("name", required=True)
    if not _DNS_LABEL.match(name):
        raise ScenarioError(f"{path}.name", f"{name!r} is not a DNS-1123 label")
    gpu_type = fields.optionalstring_value("gpuType")
    gpus = fields.integer("gpusPerNode", default=0)
    if gpus < 0:
        raise ScenarioError(f"{path}.gpusPerNode", "must be >= 0")
    if gpus and gpu_type is None:
        raise ScenarioError(f"{path}.gpuType", "required when gpusPerNode > 0")
    min_nodes = fields.integer("minNodes", default=0)
    max_nodes = fields.integer("maxNodes", default=10)
    initial = fields.integer("initialNodes", default=min_nodes)
    if min_nodes < 0:
        raise ScenarioError(f"{path}.minNodes", "must be >= 0")
    if max_nodes < min_nodes:
        raise ScenarioError(f"{path}.maxNodes", f"must be >= minNodes ({min_nodes})")
    if not min_nodes <= initial <= max_nodes:
        raise ScenarioError(
            f"{path}.initialNodes", f"must be between minNodes ({min_nodes}) and maxNodes ({max_nodes})"
        )
    pool = NodePool(
        name=name,
        zone=fields.string("zone", required=True),
        cpu=fields.quantity("cpu", default="8"),
        memory=fields.quantity("memory", default="32Gi"),
        gpu_type=gpu_type,
        gpus_per_node=gpus,
        labels=fields.string_map("labels"),
        taints=tuple(
            _parse_taint(taint, f"{path}.taints[{index}]") for index, taint in enumerate(fields.list("taints"))
        ),
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        initial_nodes=initial,
        provisioning_delay_seconds=fields.seconds("provisioningDelaySeconds", default=60.0),
        spot=fields.boolean("spot", default=False),
        queued_provisioning=fields.boolean("queuedProvisioning", default=False),
        reservation=fields.optionalstring_value("reservation"),
        cloud=_cloud(fields.string("cloud", default=cloud), f"{path}.cloud"),
        topology=parse_pool_topology(fields, path),
    )
    fields.reject_unknown()
    if pool.reservation is not None and not node_clouds.CLOUDS[pool.cloud].reservations:
        raise ScenarioError(f"{path}.reservation", f"reservations are modelled for gke only, not {pool.cloud!r}")
    if pool.reservation is not None:
        if not _DNS_LABEL.match(pool.reservation):
            raise ScenarioError(f"{path}.reservation", f"{pool.reservation!r} is not a DNS-1123 label")
        if pool.spot or pool.queued_provisioning:
            raise ScenarioError(f"{path}.reservation", "Spot and queued-provisioning VMs do not consume reservations")
    return pool


def _parse_taint(item: object, path: str) -> Taint:
    fields = Fields(item, path)
    effect = fields.string("effect", required=True)
    if effect not in _TAINT_EFFECTS:
        raise ScenarioError(f"{path}.effect", f"must be one of {', '.join(_TAINT_EFFECTS)}, got {effect!r}")
    taint = Taint(key=fields.string("key", required=True), effect=effect, value=fields.string("value", default=""))
    fields.reject_unknown()
    return taint


def _parse_autoscaler(fields: Fields) -> AutoscalerSettings:
    defaults = AutoscalerSettings()
    settings = AutoscalerSettings(
        scan_interval_seconds=fields.seconds(
            "scanIntervalSeconds", default=defaults.scan_interval_seconds, positive=True
        ),
        incremental_nodes_per_minute=fields.seconds(
            "incrementalNodesPerMinute", default=defaults.incremental_nodes_per_minute, positive=True
        ),
        scale_down_unneeded_seconds=fields.seconds(
            "scaleDownUnneededSeconds", default=defaults.scale_down_unneeded_seconds
        ),
        initial_backoff_seconds=fields.seconds("initialBackoffSeconds", default=defaults.initial_backoff_seconds),
        max_backoff_seconds=fields.seconds("maxBackoffSeconds", default=defaults.max_backoff_seconds),
        booking_seconds=fields.seconds("bookingSeconds", default=defaults.booking_seconds),
        queued_provisioning_delay_seconds=fields.seconds("queuedProvisioningDelaySeconds", default=0.0),
    )
    fields.reject_unknown()
    return settings


def _parse_kueue(fields: Fields) -> KueueSettings:
    defaults = KueueSettings()
    limit = fields.optional_integer("requeueLimit")
    settings = KueueSettings(
        wait_for_pods_ready_timeout_seconds=fields.seconds(
            "waitForPodsReadyTimeoutSeconds", default=defaults.wait_for_pods_ready_timeout_seconds, positive=True
        ),
        requeue_base_seconds=fields.seconds("requeueBaseSeconds", default=defaults.requeue_base_seconds),
        requeue_max_seconds=fields.seconds("requeueMaxSeconds", default=defaults.requeue_max_seconds),
        requeue_limit=limit,
    )
    fields.reject_unknown()
    return settings


def _parse_event(item: object, path: str, pool_names: list[str]) -> TimedEvent:
    fields = Fields(item, path)
    kind = fields.string("type", required=True)
    if kind not in EVENT_TYPES:
        raise ScenarioError(f"{path}.type", f"must be one of {', '.join(EVENT_TYPES)}, got {kind!r}")
    at = fields.seconds("at", required=True)
    event = TimedEvent(at=at, type=kind)
    if kind == "zoneSaturated":
        until = fields.seconds("until", required=True)
        if until <= at:
            raise ScenarioError(f"{path}.until", f"must be after at ({at:g})")
        event = TimedEvent(at=at, type=kind, zone=fields.string("zone", required=True), until=until)
    elif kind == "quotaChange":
        event = TimedEvent(
            at=at,
            type=kind,
            zone=fields.string("zone", required=True),
            gpu_quota=fields.integer("gpuQuota", required=True),
        )
    else:
        pool = fields.string("pool", required=True)
        if pool not in pool_names:
            raise ScenarioError(f"{path}.pool", f"no node pool named {pool!r}")
        event = TimedEvent(at=at, type=kind, pool=pool)
    fields.reject_unknown()
    return event

"""The simulated cloud behind the cluster: node pools, zone GPU quota, timed events, node objects.

:class:`Cloud` is the only mutable model of "what the cloud provider would let the autoscaler do"
(it is to the simulated cluster-autoscaler what a ``cloudprovider.NodeGroup`` is to the real one):

- how many nodes each pool has (counting nodes still being provisioned) and may still add,
- the per-zone GPU quota, changed by ``quotaChange`` events, and zones temporarily saturated by
  ``zoneSaturated`` events (a saturated zone grants no new nodes, as a GCE stockout does),
- pools removed by ``nodePoolDeleted`` events,
- the billing record of every node (simulated creation and deletion instants) for cost reports,
- spot preemptions: termination notices still to come (the scenario's ``preemptions`` and the ones
  asked for through ``POST /_sim/preemptions``) and the nodes shutting down after a notice
  (:class:`NodeShutdown`, acted on by ``controllers.preemption`` and the kubelet).

It does no I/O. Node objects are built by :func:`node_manifest` with the labels GKE puts on nodes
(a pool consuming a specific reservation: ``cloud.google.com/reservation-name``; its ``maxNodes`` is
the reservation's VM count; a pool with a ``topology``: the ``gce-topology-*`` labels of
:mod:`.node_topology`, the host being the node's name, as ``kubernetes.io/hostname`` is).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from gang_sim.world import node_clouds
from gang_sim.world.resources import GPU
from gang_sim.world.scenario import NodePool, Scenario, TimedEvent
from gang_sim.world.scenario_preemptions import PreemptionSpec

# The label GKE puts on nodes that consume a Compute Engine reservation; a pod uses the reservation by
# selecting it (https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations).
RESERVATION_LABEL = "cloud.google.com/reservation-name"

POOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
SPOT_LABEL = "cloud.google.com/gke-spot"
QUEUED_LABEL = "cloud.google.com/gke-queued"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
PROVISIONING_REQUEST_LABEL = "autoscaling.gke.io/provisioning-request"


@dataclass
class NodeRecord:
    """Billing and ownership of one node: simulated times, GPUs, and the request it was provisioned for."""

    name: str
    pool: str
    gpus: int
    created_at: float
    ready_at: float
    deleted_at: float | None = None
    provisioning_request: str | None = None

    def gpu_seconds(self, until: float) -> float:
        """GPU-seconds billed from creation until deletion (or ``until`` while the node lives)."""
        end = until if self.deleted_at is None else min(self.deleted_at, until)
        return max(0.0, end - self.created_at) * self.gpus


@dataclass
class NodeShutdown:
    """A node that got a termination notice at ``noticed_at``; its VM stops (the node is deleted) at
    ``stops_at``; each of its pods gets at most ``pod_grace_period_seconds`` after SIGTERM."""

    node: str
    pool: str
    noticed_at: float
    stops_at: float
    pod_grace_period_seconds: float
    stopped: bool = False


class Cloud:
    """Pool capacity, quotas and timed events for one :class:`Scenario`."""

    def __init__(self, scenario: Scenario, rng: random.Random) -> None:
        self.scenario = scenario
        self._rng = rng
        self.zone_gpu_quota: dict[str, int] = dict(scenario.zone_gpu_quota)
        self.deleted_pools: set[str] = set()
        self.nodes: dict[str, NodeRecord] = {}
        self._pending_events = sorted(scenario.events, key=lambda event: event.at)
        self._saturations: list[TimedEvent] = []
        self.pending_preemptions: list[PreemptionSpec] = sorted(scenario.preemptions, key=lambda item: item.at)
        self.shutdowns: dict[str, NodeShutdown] = {}

    # timed events -------------------------------------------------------------------------------

    def apply_due_events(self, now: float) -> list[TimedEvent]:
        """Apply every event whose time has come; return them (the caller deletes pools' nodes)."""
        applied: list[TimedEvent] = []
        while self._pending_events and self._pending_events[0].at <= now:
            event = self._pending_events.pop(0)
            if event.type == "quotaChange" and event.zone is not None and event.gpu_quota is not None:
                self.zone_gpu_quota[event.zone] = event.gpu_quota
            elif event.type == "nodePoolDeleted" and event.pool is not None:
                self.deleted_pools.add(event.pool)
            elif event.type == "zoneSaturated":
                self._saturations.append(event)
            applied.append(event)
        return applied

    def next_event_at(self) -> float | None:
        times = [event.at for event in self._pending_events]
        times += [event.until for event in self._saturations if event.until is not None]
        return min(times) if times else None

    def is_zone_saturated(self, zone: str, now: float) -> bool:
        return any(
            event.zone == zone and event.at <= now < (event.until if event.until is not None else float("inf"))
            for event in self._saturations
        )

    # spot preemptions ---------------------------------------------------------------------------

    def schedule_preemption(self, spec: PreemptionSpec) -> None:
        self.pending_preemptions.append(spec)
        self.pending_preemptions.sort(key=lambda item: item.at)

    def due_preemptions(self, now: float) -> list[PreemptionSpec]:
        """Remove and return the preemptions whose time has come, in time order."""
        due = [spec for spec in self.pending_preemptions if spec.at <= now]
        self.pending_preemptions = [spec for spec in self.pending_preemptions if spec.at > now]
        return due

    def cloud_of(self, node: str) -> str:
        """The cloud (``node_clouds``) of ``node``'s pool; the scenario's default for an unknown node."""
        record = self.nodes.get(node)
        pool = next((item for item in self.scenario.node_pools if record and item.name == record.pool), None)
        return pool.cloud if pool is not None else node_clouds.DEFAULT_CLOUD

    def shutdown_of(self, node: str) -> NodeShutdown | None:
        """The shutdown in progress on ``node`` (noticed, VM not stopped yet), if any."""
        shutdown = self.shutdowns.get(node)
        return None if shutdown is None or shutdown.stopped else shutdown

    # capacity -----------------------------------------------------------------------------------

    def live_nodes(self, pool: str | None = None) -> list[NodeRecord]:
        return [node for node in self.nodes.values() if node.deleted_at is None and pool in (None, node.pool)]

    def provisioned_for(self, provisioning_request: str) -> list[NodeRecord]:
        """The live nodes created for the resize request ``provisioning_request``."""
        return [node for node in self.live_nodes() if node.provisioning_request == provisioning_request]

    def zone_gpus_in_use(self, zone: str) -> int:
        pools = {pool.name for pool in self.scenario.node_pools if pool.zone == zone}
        return sum(node.gpus for node in self.live_nodes() if node.pool in pools)

    def headroom(self, pool: NodePool, now: float) -> int:
        """How many more nodes ``pool`` may get right now (max size, zone quota, stockouts, deletion)."""
        if pool.name in self.deleted_pools or self.is_zone_saturated(pool.zone, now):
            return 0
        room = pool.max_nodes - len(self.live_nodes(pool.name))
        quota = self.zone_gpu_quota.get(pool.zone)
        if quota is not None and pool.gpus_per_node > 0:
            room = min(room, (quota - self.zone_gpus_in_use(pool.zone)) // pool.gpus_per_node)
        return max(0, room)

    def add_node(self, pool: NodePool, now: float, *, provisioning_request: str | None = None) -> NodeRecord:
        """Record a new node of ``pool``; it becomes Ready after the pool's provisioning delay."""
        suffix = "".join(self._rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(4))
        name = f"gke-sim-{pool.name}-{suffix}"
        while name in self.nodes:
            suffix = "".join(self._rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(4))
            name = f"gke-sim-{pool.name}-{suffix}"
        record = NodeRecord(
            name=name,
            pool=pool.name,
            gpus=pool.gpus_per_node,
            created_at=now,
            ready_at=now + pool.provisioning_delay_seconds,
            provisioning_request=provisioning_request,
        )
        self.nodes[name] = record
        return record

    def add_initial_node(self, pool: NodePool) -> NodeRecord:
        record = self.add_node(pool, 0.0)
        record.ready_at = 0.0
        return record

    def remove_node(self, name: str, now: float) -> None:
        record = self.nodes.get(name)
        if record is not None and record.deleted_at is None:
            record.deleted_at = now

    def gpu_seconds(self, until: float) -> float:
        return sum(node.gpu_seconds(until) for node in self.nodes.values())


def node_manifest(pool: NodePool, record: NodeRecord) -> dict[str, Any]:
    """The Node object for ``record``, labelled and tainted as the pool's cloud does (GKE by default;
    spot labels and taints by :mod:`gang_sim.world.node_clouds`), Ready, with its capacity."""
    labels = {
        HOSTNAME_LABEL: record.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        ZONE_LABEL: pool.zone,
        "topology.kubernetes.io/region": pool.zone.rsplit("-", 1)[0],
        POOL_LABEL: pool.name,
        **pool.labels,
    }
    capacity = {"cpu": pool.cpu, "memory": pool.memory, "pods": "110"}
    taints = [taint.to_api() for taint in pool.taints]
    taints += [taint for taint in node_clouds.capacity_taints(pool.cloud, spot=pool.spot) if taint not in taints]
    if pool.gpus_per_node and pool.gpu_type:
        labels[ACCELERATOR_LABEL] = pool.gpu_type
        capacity[GPU] = str(pool.gpus_per_node)
    labels.update(node_clouds.capacity_labels(pool.cloud, spot=pool.spot))
    if pool.queued_provisioning:
        labels[QUEUED_LABEL] = "true"
    if pool.reservation is not None:
        labels[RESERVATION_LABEL] = pool.reservation
    if record.provisioning_request:
        labels[PROVISIONING_REQUEST_LABEL] = record.provisioning_request
    if pool.topology is not None:
        labels.update(pool.topology.labels(host=record.name))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": record.name, "labels": labels},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "nodeInfo": _node_info(record.name),
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": record.name},
            ],
        },
    }


def _node_info(name: str) -> dict[str, str]:
    """``status.nodeInfo``: every field is required by the official clients' models."""
    return {
        "architecture": "amd64",
        "bootID": f"sim-boot-{name}",
        "containerRuntimeVersion": "sim://1.0.0",
        "kernelVersion": "6.1.0-sim",
        "kubeProxyVersion": "v1.33.0-sim",
        "kubeletVersion": "v1.33.0-sim",
        "machineID": f"sim-machine-{name}",
        "operatingSystem": "linux",
        "osImage": "Container-Optimized OS (simulated)",
        "systemUUID": f"sim-uuid-{name}",
    }

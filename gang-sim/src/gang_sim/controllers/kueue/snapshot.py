"""The state the Kueue helpers decide on: small frozen snapshots the manager reads from the Store.

As upstream kubernetes-sigs/kueue's scheduler works on a snapshot of its cache
(``pkg/cache/snapshot.go``: ClusterQueues, cohorts, ResourceFlavors and their usage, taken once per
scheduling cycle), each helper here gets one of these and returns patches (:mod:`.patches`):

- :class:`QueueSnapshot`: the ResourceFlavors, ClusterQueues, LocalQueues, AdmissionChecks,
  ProvisioningRequestConfigs and Topologies of one pass;
- :class:`TopologyState`: what Topology Aware Scheduling sees of the cluster in one pass (nodes, the
  non-TAS pods' usage, the TAS usage of Workloads holding quota);
- :class:`ReservationSnapshot`: what quota reservation needs (the queues, the usage of the pass, the
  namespace's labels, the topology state);
- :class:`CheckSnapshot`: what the ProvisioningRequest admission check needs (the namespace's
  requests by name);
- :class:`WorkloadSnapshot`: what the workload controller needs (the owner's state, when the
  Workload was admitted, how long it must wait to be requeued, the waitForPodsReady settings);
- :class:`IntegrationSnapshot`: the Workloads, Jobs and pods the Job and Pod integrations look at.

Snapshots hold the Store's objects as read; helpers never mutate them. ``now`` is the simulated
time, ``wall_clock`` the time object timestamps (``lastTransitionTime``, ``requeueAt``) are written in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gang_sim.controllers.base import Obj
from gang_sim.controllers.kueue import quota
from gang_sim.world.resources import Resources
from gang_sim.world.scenario import KueueSettings


def timestamp(wall_clock: datetime, after_seconds: float = 0.0) -> str:
    """RFC 3339 (second precision) ``after_seconds`` past ``wall_clock``."""
    return (wall_clock + timedelta(seconds=after_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class QueueSnapshot:
    """The Kueue configuration objects of one pass, by name (LocalQueues by ``(namespace, name)``)."""

    flavors: Mapping[str, Obj]
    cluster_queues: Mapping[str, Obj]
    local_queues: Mapping[tuple[str, str], Obj]
    admission_checks: Mapping[str, Obj]
    provisioning_configs: Mapping[str, Obj]
    topologies: Mapping[str, Obj] = field(default_factory=dict)


@dataclass(frozen=True)
class TopologyState:
    """The cluster as Topology Aware Scheduling sees it in one pass.

    ``non_tas``: requests of the bound non-TAS pods, by node; ``usage``: the TAS usage of the Workloads
    holding quota (and of those reserved earlier in the pass), by flavor and leaf id.
    """

    nodes: tuple[Obj, ...] = ()
    non_tas: Mapping[str, Resources] = field(default_factory=dict)
    usage: Mapping[str, Mapping[str, Resources]] = field(default_factory=dict)


@dataclass(frozen=True)
class Owner:
    """What a Workload stands for: its Job, or its pods (a plain pod group, or a single plain pod)."""

    job: Obj | None = None
    pods: tuple[Obj, ...] = ()


@dataclass(frozen=True)
class ReservationSnapshot:
    """Quota reservation input: ``usage`` is every reserving Workload's, including those reserved
    earlier in this pass."""

    workload: Obj
    queues: QueueSnapshot
    usage: quota.Usage
    namespace_labels: Mapping[str, str]
    now: float
    wall_clock: datetime
    topology: TopologyState = TopologyState()


@dataclass(frozen=True)
class CheckSnapshot:
    """ProvisioningRequest admission-check input: ``requests`` are the ProvisioningRequests of the
    Workload's namespace, by name."""

    workload: Obj
    queues: QueueSnapshot
    requests: Mapping[str, Obj]
    wall_clock: datetime


@dataclass(frozen=True)
class WorkloadSnapshot:
    """Workload controller input.

    ``admitted_at``: simulated time of the admission the waitForPodsReady timeout counts from (None
    when not recorded); ``requeue_at``: no reservation before this simulated time (None: none due).
    """

    workload: Obj
    owner: Owner
    settings: KueueSettings
    now: float
    wall_clock: datetime
    admitted_at: float | None = None
    requeue_at: float | None = None


@dataclass(frozen=True)
class IntegrationSnapshot:
    """Job and Pod integration input: every Workload, Job and pod."""

    workloads: tuple[Obj, ...]
    jobs: tuple[Obj, ...]
    pods: tuple[Obj, ...]

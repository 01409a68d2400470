"""Topology Aware Scheduling in Kueue's quota reservation: the placement a podSet's quota must come
with. Pure.

As kubernetes-sigs/kueue v0.17.0 ``pkg/scheduler/flavorassigner/flavorassigner.go`` (``Assign``
runs ``FindTopologyAssignmentsForWorkload`` once the flavors fit) and ``tas_flavorassigner.go``: a
podSet that asks for TAS (:func:`.tas.is_requested`) is admitted only with a topology assignment in
its one TAS flavor; the snapshot of that flavor (:func:`.tas.snapshot`) sees the TAS usage of the
Workloads holding quota and of the podSets placed before it in the pass. :class:`Placer` is the
``accept`` callback :func:`.quota.assign` consults, so partial admission searches counts that fit
both the quota and the topology. The failure at the full count is what the Workload's
``QuotaReserved=False`` message says (``couldn't assign flavors to pod set main: topology "t" allows
to fit only 2 out of 4 pod(s)``); a podSet with no (or two) TAS flavors assigned fails with
``failed to assign flavors to pod set main: no TAS flavor assigned``, as ``Assignment.Message`` words
an error.

Not modelled: the admission checks' ``podSetUpdates`` merged into the request (Kueue merges those
of Ready checks; at quota reservation there are none in the emulator's order), the preemption pass
(a podSet that does not fit waits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gang_sim.controllers.kueue import quota, tas, tas_placement
from gang_sim.controllers.kueue.snapshot import QueueSnapshot, TopologyState
from gang_sim.controllers.kueue.tas_placement import Placement
from gang_sim.world.resources import Resources, add

Obj = dict[str, Any]


class Placer:
    """The TAS side of one Workload's reservation in one ClusterQueue (module docstring)."""

    def __init__(self, workload: Obj, cluster_queue: Obj, queues: QueueSnapshot, state: TopologyState) -> None:
        self.pod_sets = {item["name"]: item for item in (workload.get("spec") or {}).get("podSets") or []}
        self.queues = queues
        self.state = state
        self.tas_only = tas.is_tas_only(cluster_queue, queues.flavors)
        self.placements: dict[str, tuple[str, Placement]] = {}
        """PodSet name -> (TAS flavor, placement), the latest accepted."""
        self.failure: str | None = None
        """Why the first podSet that failed at its full count did not fit."""

    def refusals(self, pod_set: Mapping[str, Any], cluster_queue: Obj) -> dict[str, str]:
        return tas.flavor_refusals(pod_set, cluster_queue, self.queues.flavors, self.queues.topologies)

    def accept(self, request: quota.PodSetRequest, assignment: quota.PodSetAssignment) -> bool:
        """:data:`.quota.Accept`: place ``assignment.count`` pods of the podSet, or refuse."""
        pod_set = self.pod_sets[request.name]
        if not tas.is_requested(pod_set, self.tas_only):
            return True
        full = assignment.count == request.count
        flavors = sorted(
            {name for name in assignment.flavors.values() if tas.is_tas_flavor(self.queues.flavors.get(name))}
        )
        if len(flavors) != 1:
            error = (
                "no TAS flavor assigned" if not flavors else f"more than one TAS flavor assigned: {', '.join(flavors)}"
            )
            return self._refuse(full, f"failed to assign flavors to pod set {request.name}: {error}")
        flavor = self.queues.flavors[flavors[0]]
        topology = self.queues.topologies[str(flavor["spec"]["topologyName"])]
        snapshot = tas.snapshot(
            flavor, topology, self.state.nodes, self.state.non_tas, self.state.usage.get(flavors[0], {})
        )
        placed = tas_placement.place(
            snapshot, tas.placement_request(pod_set, assignment.count), self._assumed(flavors[0], request.name)
        )
        if isinstance(placed, str):
            return self._refuse(full, f"couldn't assign flavors to pod set {request.name}: {placed}")
        self.placements[request.name] = (flavors[0], placed)
        return True

    def _refuse(self, full: bool, message: str) -> bool:
        if full and self.failure is None:
            self.failure = message
        return False

    def _assumed(self, flavor: str, pod_set: str) -> dict[str, Resources]:
        """The TAS usage of the other podSets placed in ``flavor`` (by leaf id)."""
        assumed: dict[str, Resources] = {}
        for name, (placed_flavor, placement) in self.placements.items():
            if name == pod_set or placed_flavor != flavor:
                continue
            for leaf, amount in tas_placement.usage_of(placement, tas.pod_requests_of(self.pod_sets[name])).items():
                assumed[leaf] = add(assumed.get(leaf, {}), amount)
        return assumed

    def topology_assignment(self, pod_set: str) -> dict[str, Any] | None:
        """The ``topologyAssignment`` of a placed podSet (``None``: no TAS)."""
        found = self.placements.get(pod_set)
        return None if found is None else tas.to_api(found[1])

    def usage(self) -> dict[str, dict[str, Resources]]:
        """The TAS usage of every placed podSet: flavor -> leaf id -> resources."""
        usage: dict[str, dict[str, Resources]] = {}
        for name, (flavor, placement) in self.placements.items():
            tas.merge_usage(
                usage, {flavor: tas_placement.usage_of(placement, tas.pod_requests_of(self.pod_sets[name]))}
            )
        return usage

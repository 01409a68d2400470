"""Spot preemption: Compute Engine's termination notice and GKE's graceful node shutdown (and the
other clouds' reclaim, which differs only in the taint, ``world.node_clouds``).

GKE (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms, "Termination and graceful
shutdown of Spot VMs"): when Compute Engine reclaims a Spot VM it sends a termination notice; the node
gets the taint ``cloud.google.com/impending-node-termination:NoSchedule``, the kubelet's graceful
node shutdown (https://kubernetes.io/docs/concepts/cluster-administration/node-shutdown/) gives
non-system pods up to 15 of the 30 seconds, and the VM stops. Cloud-provider-gcp then deletes the
Node and the pods bound to it are garbage collected (pod GC's rule for pods on deleted nodes).

:class:`NodeTerminationController` plays Compute Engine and the node-termination side of GKE. For
each due preemption (:class:`~gang_sim.world.scenario_preemptions.PreemptionSpec`, from
the scenario's ``preemptions`` or ``POST /_sim/preemptions``) it picks the node(s) - a named node, or
``count`` Ready nodes of the pool not already shutting down, drawn in name order with the control
plane's seeded random source - and for each

1. adds the taint above - the node's cloud's reclaim taint (:func:`gang_sim.world.node_clouds.reclaim_taint`:
   Karpenter ``karpenter.sh/disrupted``, EKS with the Node Termination Handler
   ``aws-node-termination-handler/spot-itn``, none on AKS) - sets ``Ready=False`` (reason ``KubeletNotReady``, message
   ``node is shutting down``, as the kubelet reports a node in shutdown) and records the kubelet's
   ``Normal NodeShutdown`` Event ("Shutdown manager detected shutdown event") on the Node;
2. registers a :class:`~gang_sim.world.cloud.NodeShutdown`: the kubelet then stops
   every pod on the node (:func:`shutdown_status`; a local process gets a real SIGTERM and SIGKILL
   after ``min(terminationGracePeriodSeconds, podGracePeriodSeconds)``);
3. at ``noticeSeconds`` after the notice deletes the Node (billing stops); the kubelet's orphan rule
   then deletes its pods. The cluster-autoscaler replaces capacity for pods that are pending later,
   as for any missing capacity.

A preemption that finds no node (pool empty, or the named node gone) does nothing; it is listed with
``nodes: []`` by ``GET /_sim/preemptions``.

Not modelled: the second shutdown phase for critical system pods (``shutdownGracePeriodCriticalPods``:
every pod gets the same budget), the managed instance group recreating the VM under the same name
(the autoscaler adds new nodes instead), ProvisioningRequests reacting to the loss of their nodes
(no ``CapacityRevoked`` on preemption), and pod GC's quarantine and ``DeletionByPodGC`` condition
(the pods of the deleted node are removed at the kubelet's next pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.base import Controller, Obj, earliest, set_condition
from gang_sim.world import node_clouds
from gang_sim.world.cloud import NodeShutdown
from gang_sim.world.scenario_preemptions import PreemptionSpec, describe

TERMINATION_TAINT = node_clouds.reclaim_taint("gke") or {}
"""The taint GKE puts on a node that got its termination notice."""
SHUTDOWN_REASON = "Terminated"
"""``status.reason`` of a pod stopped by graceful node shutdown (kubelet ``nodeshutdown`` manager)."""
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
"""``status.message`` and the ``DisruptionTarget`` condition's message (kubelet ``nodeshutdown``)."""
DISRUPTION_TARGET = "DisruptionTarget"
TERMINATION_BY_KUBELET = "TerminationByKubelet"
NODE_SHUTTING_DOWN = "node is shutting down"


@dataclass
class PreemptionRecord:
    """One applied or pending preemption and the nodes it chose (``GET /_sim/preemptions``)."""

    spec: PreemptionSpec
    nodes: list[str] = field(default_factory=list)
    applied: bool = False

    def to_json(self) -> dict[str, Any]:
        return {**describe(self.spec), "applied": self.applied, "nodes": list(self.nodes)}


def shutdown_status(pod: Obj, conditions: list[Obj], container_statuses: list[Obj]) -> Obj:
    """The status the kubelet writes for a pod it stopped for node shutdown: ``Failed``, reason
    ``Terminated``, upstream's message, ``DisruptionTarget=True/TerminationByKubelet``."""
    conditions = set_condition(conditions, DISRUPTION_TARGET, "True", TERMINATION_BY_KUBELET, SHUTDOWN_MESSAGE)
    return {
        "phase": "Failed",
        "reason": SHUTDOWN_REASON,
        "message": SHUTDOWN_MESSAGE,
        "conditions": conditions,
        "containerStatuses": container_statuses,
    }


class NodeTerminationController(Controller):
    component = "node-termination"
    watches = frozenset({"v1/nodes"})
    resync_seconds = 24 * 3600.0  # every deadline is known (reconcile returns it): no periodic pass needed

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cloud = self.plane.cloud
        self.records: list[PreemptionRecord] = [PreemptionRecord(spec) for spec in self.cloud.pending_preemptions]

    def request(self, spec: PreemptionSpec) -> PreemptionRecord:
        """Schedule ``spec`` (``POST /_sim/preemptions``); applied now if it is due."""
        record = PreemptionRecord(spec)
        self.records.append(record)
        self.cloud.schedule_preemption(spec)
        self.reconcile(self.plane.clock.now())
        self._dirty.set()
        return record

    def reconcile(self, now: float) -> float | None:
        for spec in self.cloud.due_preemptions(now):
            record = next(item for item in self.records if item.spec is spec and not item.applied)
            record.applied = True
            for node in self._choose(spec):
                with self.guard({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}):
                    self._notify(node, spec, now)
                    record.nodes.append(node)
        for shutdown in self.cloud.shutdowns.values():
            if not shutdown.stopped and shutdown.stops_at <= now:
                self._stop_vm(shutdown, now)
        pending = [spec.at for spec in self.cloud.pending_preemptions]
        stopping = [item.stops_at for item in self.cloud.shutdowns.values() if not item.stopped]
        return earliest(min(pending, default=None), min(stopping, default=None))

    def _choose(self, spec: PreemptionSpec) -> list[str]:
        nodes = {node["metadata"]["name"]: node for node in self.store.list("v1/nodes")[0]}
        if spec.node is not None:
            return [spec.node] if spec.node in nodes and self.cloud.shutdown_of(spec.node) is None else []
        candidates = sorted(
            record.name
            for record in self.cloud.live_nodes(spec.pool)
            if record.name in nodes and record.name not in self.cloud.shutdowns
        )
        return sorted(self.plane.rng.sample(candidates, min(spec.count, len(candidates))))

    def _notify(self, name: str, spec: PreemptionSpec, now: float) -> None:
        node = self.store.get("v1/nodes", name)
        reclaim = node_clouds.reclaim_taint(self.cloud.cloud_of(name))
        if reclaim is not None:
            taints = [
                taint for taint in (node.get("spec") or {}).get("taints") or [] if taint.get("key") != reclaim["key"]
            ]
            self.store.patch("v1/nodes", name, {"spec": {"taints": [*taints, reclaim]}})
        conditions = set_condition(
            list((node.get("status") or {}).get("conditions") or []),
            "Ready",
            "False",
            "KubeletNotReady",
            NODE_SHUTTING_DOWN,
        )
        self.store.patch("v1/nodes", name, {"status": {"conditions": conditions}}, subresource="status")
        record = self.cloud.nodes.get(name)
        self.cloud.shutdowns[name] = NodeShutdown(
            node=name,
            pool=record.pool if record is not None else "",
            noticed_at=now,
            stops_at=now + spec.notice_seconds,
            pod_grace_period_seconds=spec.pod_grace_period_seconds,
        )
        self.plane.record_event(node, "NodeShutdown", "Shutdown manager detected shutdown event", component="kubelet")

    def _stop_vm(self, shutdown: NodeShutdown, now: float) -> None:
        shutdown.stopped = True
        self.cloud.remove_node(shutdown.node, now)
        try:
            self.store.delete("v1/nodes", shutdown.node)
        except ApiError as error:
            if error.code != 404:
                raise

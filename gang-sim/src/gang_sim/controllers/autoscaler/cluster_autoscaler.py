"""The simulated cluster-autoscaler: node lifecycle, incremental scale-up, scale-down, timed events.

Every ``scanIntervalSeconds`` (CA ``--scan-interval``, 10 s) one loop

1. applies the scenario's due timed events (a deleted pool loses its nodes at once);
2. runs the ProvisioningRequest processor (:class:`~.provisioner.RequestProcessor`);
3. scales up for *ordinary* unschedulable pods, at most ``incrementalNodesPerMinute`` nodes per
   minute (a token bucket): the "no gang scheduling" baseline that makes a 32-GPU job arrive 4 GPUs at
   a time. Pods that fit on nodes still being provisioned wait for them. Scheduling-gated pods and
   pods consuming a ProvisioningRequest never trigger scale-up; the latter get the upstream
   ``NotTriggerScaleUp`` event "Unschedulable pod didn't trigger scale-up, because it's consuming
   ProvisioningRequest ns/name";
4. scales down nodes that have had no running pod for ``scaleDownUnneededSeconds`` (default 10 min)
   unless the pool is at ``minNodes`` or the node is held by an active booking (nodes provisioned for
   the request, and nodes the booked pods that are not bound yet would be packed onto).

Node objects are registered when their pool's provisioning delay has passed (the VM boots and the
kubelet registers), between loops, at the exact simulated instant.

The autoscaler is the :class:`~.node_groups.NodeGroups` the request processor works on (it implements
that protocol structurally: ``cloudprovider/cloud_provider.go``'s ``NodeGroup`` operations plus the
cluster snapshot), so the processor never imports this module.
"""

from __future__ import annotations

from typing import Any

from gang_sim.controllers.autoscaler import node_groups
from gang_sim.controllers.autoscaler.provisioner import RequestProcessor
from gang_sim.controllers.autoscaler.provisioning import consumed_request
from gang_sim.controllers.autoscaler.scaleup import (
    Bin,
    GroupOption,
    pack,
    plan_incremental,
)
from gang_sim.controllers.base import Controller, Obj, condition, earliest
from gang_sim.controllers.node_registration import register_node
from gang_sim.controllers.scheduler import is_terminal, node_usage
from gang_sim.world.cloud import NodeRecord, node_manifest
from gang_sim.world.scenario import NodePool


def is_unschedulable(pod: Obj) -> bool:
    scheduled = condition(pod, "PodScheduled")
    return (
        scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
        and not (pod.get("spec") or {}).get("nodeName")
        and not (pod.get("spec") or {}).get("schedulingGates")
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    )


class ClusterAutoscaler(Controller):
    component = "cluster-autoscaler"
    watches = frozenset({"v1/pods", "v1/nodes", "autoscaling.x-k8s.io/v1/provisioningrequests", "v1/podtemplates"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = self.plane.scenario.autoscaler
        self.settings = settings
        self.cloud = self.plane.cloud
        self.requests = RequestProcessor(self, node_groups=self)
        # Rebuilt from the cloud and the Store, so that a restarted autoscaler registers the nodes still
        # booting and never registers one twice.
        stored = {node["metadata"]["name"] for node in self.store.list("v1/nodes")[0]}
        self.registered: set[str] = {record.name for record in self.cloud.live_nodes() if record.name in stored}
        self.next_scan = 0.0
        self.last_scan: float | None = None
        self.tokens = self._token_cap()
        self.idle_since: dict[str, float] = {}
        self.reported_consumers: set[str] = set()
        self.resync_seconds = settings.scan_interval_seconds

    def _token_cap(self) -> float:
        return max(1.0, self.settings.incremental_nodes_per_minute * self.settings.scan_interval_seconds / 60)

    def reconcile(self, now: float) -> float | None:
        self._register_ready_nodes(now)
        if now >= self.next_scan:
            self._scan(now)
            self.next_scan = now + self.settings.scan_interval_seconds
            self._register_ready_nodes(now)
        pending_ready = [r.ready_at for r in self.cloud.live_nodes() if r.name not in self.registered]
        return earliest(self.next_scan, min(pending_ready, default=None), self.cloud.next_event_at())

    def pool(self, name: str) -> NodePool:
        return self.plane.scenario.pool(name)

    def _register_ready_nodes(self, now: float) -> None:
        for record in self.cloud.live_nodes():
            if record.name not in self.registered and record.ready_at <= now:
                register_node(self.store, self.pool(record.pool), record)
                self.registered.add(record.name)

    def group_options(self, now: float, *, queued: bool) -> list[GroupOption]:
        """:meth:`.node_groups.NodeGroups.group_options`: the cloud's pools of that kind, with headroom."""
        return node_groups.group_options(self.cloud, now, queued=queued)

    def is_registered(self, name: str) -> bool:
        return name in self.registered

    def nodes_provisioned_for(self, provisioning_request: str) -> list[NodeRecord]:
        return self.cloud.provisioned_for(provisioning_request)

    def add_nodes(
        self, pool_name: str, count: int, now: float, *, provisioning_request: str | None = None
    ) -> list[NodeRecord]:
        pool = self.pool(pool_name)
        records = [self.cloud.add_node(pool, now, provisioning_request=provisioning_request) for _ in range(count)]
        return records

    def remove_node(self, name: str, now: float) -> None:
        self.cloud.remove_node(name, now)
        self.registered.discard(name)
        self.idle_since.pop(name, None)
        try:
            self.store.delete("v1/nodes", name)
        except Exception:  # already gone
            return

    def _scan(self, now: float) -> None:
        for event in self.cloud.apply_due_events(now):
            if event.type == "nodePoolDeleted":
                for record in self.cloud.live_nodes(event.pool):
                    self.remove_node(record.name, now)
        if self.last_scan is not None:
            elapsed = now - self.last_scan
            self.tokens = min(
                self._token_cap(), self.tokens + self.settings.incremental_nodes_per_minute * elapsed / 60
            )
        self.last_scan = now
        pods, _ = self.store.list("v1/pods")
        nodes, _ = self.store.list("v1/nodes")
        self.requests.process(now, pods, nodes)
        self._scale_up(now, pods, nodes)
        self._scale_down(now, pods, nodes)

    def node_bins(self, pods: list[Obj], nodes: list[Obj]) -> list[Bin]:
        """Registered nodes with their free capacity, then nodes still being provisioned (empty)."""
        usage = node_usage(pods)
        bins = []
        for node in sorted(nodes, key=lambda item: item["metadata"]["name"]):
            target = Bin.empty(node)
            for name, amount in usage.get(node["metadata"]["name"], {}).items():
                target.free[name] = target.free.get(name, 0) - amount
            bins.append(target)
        for record in self.cloud.live_nodes():
            if record.name not in self.registered:
                bins.append(Bin.empty(node_manifest(self.pool(record.pool), record)))
        return bins

    def _scale_up(self, now: float, pods: list[Obj], nodes: list[Obj]) -> None:
        candidates = []
        for pod in pods:
            if not is_unschedulable(pod):
                continue
            consumed = consumed_request(pod)
            if consumed is None:
                candidates.append(pod)
                continue
            uid = pod["metadata"]["uid"]
            if uid not in self.reported_consumers:
                self.reported_consumers.add(uid)
                message = (
                    "Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest "
                    f"{pod['metadata']['namespace']}/{consumed}"
                )
                self.plane.record_event(pod, "NotTriggerScaleUp", message, component=self.component)
        if not candidates:
            return
        bins = self.node_bins(pods, nodes)
        self.requests.reserve_bookings(bins, pods)
        leftover = pack([pod.get("spec") or {} for pod in candidates], bins)
        budget = int(self.tokens + 1e-9)
        if not leftover or budget <= 0:
            return
        for pool_name, count in plan_incremental(leftover, self.group_options(now, queued=False), budget):
            before = len(self.cloud.live_nodes(pool_name))
            self.add_nodes(pool_name, count, now)
            self.tokens -= count
            limit = self.pool(pool_name).max_nodes
            message = f"pod triggered scale-up: [{{{pool_name} {before}->{before + count} (max: {limit})}}]"
            for pod in candidates:
                self.plane.record_event(pod, "TriggeredScaleUp", message, component=self.component)

    def _booked_nodes(self, pods: list[Obj], nodes: list[Obj]) -> set[str]:
        """Nodes that booked-but-unbound request pods would land on (CA injects them as fake pods)."""
        bins = [target for target in self.node_bins(pods, nodes) if target.node["metadata"]["name"] in self.registered]
        before = [dict(target.free) for target in bins]
        self.requests.reserve_bookings(bins, pods)
        return {
            target.node["metadata"]["name"] for target, free in zip(bins, before, strict=True) if target.free != free
        }

    def _scale_down(self, now: float, pods: list[Obj], nodes: list[Obj]) -> None:
        busy = {
            (pod.get("spec") or {}).get("nodeName")
            for pod in pods
            if (pod.get("spec") or {}).get("nodeName") and not is_terminal(pod)
        }
        protected = self.requests.protected_nodes() | self._booked_nodes(pods, nodes)
        for record in list(self.cloud.live_nodes()):
            name = record.name
            if name not in self.registered or name in busy or name in protected:
                self.idle_since.pop(name, None)
                continue
            since = self.idle_since.setdefault(name, now)
            pool = self.pool(record.pool)
            if (
                now - since >= self.settings.scale_down_unneeded_seconds
                and len(self.cloud.live_nodes(pool.name)) > pool.min_nodes
            ):
                self.remove_node(name, now)
                self.plane.record_event(
                    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}},
                    "ScaleDown",
                    f"node removed by cluster autoscaler: unneeded for {self.settings.scale_down_unneeded_seconds:g}s",
                    component=self.component,
                )

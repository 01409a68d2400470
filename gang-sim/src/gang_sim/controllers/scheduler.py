"""The simulated kube-scheduler: binds pending pods to nodes, or says why it cannot.

Per pass, pending pods (no ``spec.nodeName``, not being deleted) are taken in creation order (the
scheduling queue's FIFO for equal priorities) and each is

- **gated** when ``spec.schedulingGates`` is non-empty: ``PodScheduled=False``, reason
  ``SchedulingGated``, message "Scheduling is blocked due to non-empty scheduling gates" (KEP-3521;
  the pod is never bound and never counts as unschedulable);
- **bound** to the best feasible node (filters in :mod:`fit`, LeastAllocated score, ties by name)
  through the ``binding`` subresource, with ``PodScheduled=True``;
- otherwise **unschedulable**: ``PodScheduled=False``, reason ``Unschedulable``, with the
  ``FitError`` message, plus a ``FailedScheduling`` Warning Event when the message changes.

Pods of a PodGroup with a gang policy (``spec.schedulingGroup``) are placed all together or not at
all, before the other pods of the pass (:mod:`.gang_scheduling`); with the
``TopologyAwareWorkloadScheduling`` gate on (the API server's, :mod:`gang_sim.apiserver.feature_gates`)
a PodGroup's topology constraint places them all in one domain.

Capacity used by pods bound earlier in the same pass is accounted immediately. Pods consuming a
ProvisioningRequest are scheduled like any other pod: booking only protects capacity from *other
requests* (reference 1.4), which the autoscaler handles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gang_sim.apiserver.feature_gates import TOPOLOGY_AWARE_WORKLOAD_SCHEDULING, is_enabled
from gang_sim.controllers import fit, gang_scheduling
from gang_sim.controllers.base import Controller, Obj, condition, same_conditions, set_condition
from gang_sim.world.resources import Resources, add, pod_requests

GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


@dataclass(frozen=True)
class Placement:
    """The scheduler's decision for one pod: ``node`` to bind to, or ``reason``/``message`` why not."""

    pod: Obj
    node: str | None
    reason: str = ""
    message: str = ""


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_pending_unbound(pod: Obj) -> bool:
    return (
        not (pod.get("spec") or {}).get("nodeName")
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
        and not is_terminal(pod)
    )


def node_usage(pods: list[Obj]) -> dict[str, Resources]:
    """Requests of the non-terminal pods bound to each node."""
    usage: dict[str, Resources] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not is_terminal(pod):
            usage[node] = add(usage.get(node, {}), pod_requests(pod.get("spec") or {}))
    return usage


def is_node_ready(node: Obj) -> bool:
    return any(
        item.get("type") == "Ready" and item.get("status") == "True"
        for item in (node.get("status") or {}).get("conditions") or []
    )


def place(pending: list[Obj], nodes: list[Obj], usage: dict[str, Resources]) -> list[Placement]:
    """Decide every pending pod in order; ``usage`` is updated with the pods placed here."""
    ready = sorted((node for node in nodes if is_node_ready(node)), key=lambda node: node["metadata"]["name"])
    capacities = {node["metadata"]["name"]: fit.allocatable(node) for node in ready}
    placements: list[Placement] = []
    for pod in sorted(pending, key=_queue_order):
        spec = pod.get("spec") or {}
        if spec.get("schedulingGates"):
            placements.append(Placement(pod, None, "SchedulingGated", GATED_MESSAGE))
            continue
        requests = pod_requests(spec)
        failures: dict[str, list[str]] = {}
        best: tuple[float, str] | None = None
        for node in ready:
            name = node["metadata"]["name"]
            used = usage.get(name, {})
            reasons = fit.fit_failures(spec, requests, node, used, capacities[name])
            if reasons:
                failures[name] = reasons
                continue
            score = fit.least_allocated_score(requests, node, used, capacities[name])
            if best is None or score > best[0]:
                best = (score, name)
        if best is None:
            placements.append(Placement(pod, None, "Unschedulable", fit.unschedulable_message(len(ready), failures)))
            continue
        usage[best[1]] = add(usage.get(best[1], {}), requests)
        placements.append(Placement(pod, best[1]))
    return placements


def _queue_order(pod: Obj) -> tuple[int, str, str]:
    metadata = pod.get("metadata") or {}
    priority = int((pod.get("spec") or {}).get("priority") or 0)
    return (-priority, str(metadata.get("creationTimestamp", "")), str(metadata.get("name", "")))


class Scheduler(Controller):
    component = "default-scheduler"
    watches = frozenset({"v1/pods", "v1/nodes", gang_scheduling.POD_GROUPS})

    def reconcile(self, now: float) -> float | None:
        pods = self.store.view("v1/pods")
        nodes = self.store.view("v1/nodes")
        pending = [pod for pod in pods if is_pending_unbound(pod)]
        if not pending:
            return None
        usage = node_usage(pods)
        grouped = [pod for pod in pending if gang_scheduling.group_name(pod) is not None]
        individual = [pod for pod in pending if gang_scheduling.group_name(pod) is None]
        individual += self._schedule_gangs(grouped, pods, nodes, usage)
        for placement in place(individual, nodes, usage):
            with self.guard(placement.pod):
                self._apply(placement)
        return None

    def _schedule_gangs(
        self, grouped: list[Obj], pods: list[Obj], nodes: list[Obj], usage: dict[str, Resources]
    ) -> list[Obj]:
        """Run one pod group scheduling cycle per gang with pending pods, in queue order
        (:mod:`.gang_scheduling`); ``usage`` takes what they bind. Returns the pods of groups without
        a gang policy, to be scheduled one by one."""
        served_type = self.store.registry.lookup("scheduling.k8s.io/v1beta1", "podgroups")
        served = served_type is not None
        topology_on = is_enabled(served_type, TOPOLOGY_AWARE_WORKLOAD_SCHEDULING)
        by_group: dict[tuple[str, str], list[Obj]] = {}
        for pod in sorted(grouped, key=_queue_order):
            by_group.setdefault((pod["metadata"]["namespace"], str(gang_scheduling.group_name(pod))), []).append(pod)
        one_by_one: list[Obj] = []
        for (namespace, name), queued in by_group.items():
            pod_group = _find(self.store.view(gang_scheduling.POD_GROUPS, namespace), name) if served else None
            if pod_group is None:
                continue  # PreEnqueue: "waiting for pods's pod group to appear in scheduling queue"
            min_count = gang_scheduling.gang_min_count(pod_group)
            if min_count is None:
                one_by_one += queued
                continue
            members = [
                pod
                for pod in pods
                if pod["metadata"]["namespace"] == namespace
                and gang_scheduling.group_name(pod) == name
                and not is_terminal(pod)
                and not pod["metadata"].get("deletionTimestamp")
            ]
            if len(members) < min_count:
                continue  # PreEnqueue: "waiting for minCount pods from a gang to appear in scheduling queue"
            bound_nodes = [str(pod["spec"]["nodeName"]) for pod in members if (pod.get("spec") or {}).get("nodeName")]
            unschedulable = _unschedulable
            if topology_on and gang_scheduling.topology_key(pod_group) is not None:
                plan = gang_scheduling.plan_topology_group(
                    pod_group, queued, bound_nodes, nodes, place=place, usage=usage, unschedulable=unschedulable
                )
            else:
                plan = gang_scheduling.plan_group(
                    pod_group,
                    queued,
                    len(bound_nodes),
                    place=lambda batch, trial: place(batch, nodes, trial),
                    usage=usage,
                    unschedulable=unschedulable,
                )
            usage.clear()
            usage.update(plan.usage)
            for placement in plan.placements:
                with self.guard(placement.pod):
                    self._apply(placement)
            if plan.condition is not None:
                with self.guard(pod_group):
                    self._set_group_condition(pod_group, *plan.condition)
        return one_by_one

    def _set_group_condition(self, pod_group: Obj, status: str, reason: str, message: str) -> None:
        metadata = pod_group["metadata"]
        conditions = list((pod_group.get("status") or {}).get("conditions") or [])
        extra = {"observedGeneration": metadata.get("generation", 1)}
        updated = set_condition(conditions, gang_scheduling.INITIALLY_SCHEDULED, status, reason, message, extra=extra)
        if same_conditions(conditions, updated):
            return
        self.store.patch(
            gang_scheduling.POD_GROUPS,
            metadata["name"],
            {"status": {"conditions": updated}},
            namespace=metadata["namespace"],
            subresource="status",
        )

    def _apply(self, placement: Placement) -> None:
        pod = placement.pod
        metadata = pod["metadata"]
        if placement.node is not None:
            bind(self.store, pod, placement.node)
            self.plane.record_event(
                pod,
                "Scheduled",
                f"Successfully assigned {metadata['namespace']}/{metadata['name']} to {placement.node}",
                component=self.component,
            )
            return
        previous = condition(pod, "PodScheduled")
        conditions = list((pod.get("status") or {}).get("conditions") or [])
        updated = set_condition(
            conditions, "PodScheduled", "False", placement.reason, placement.message, extra={"lastProbeTime": None}
        )
        if same_conditions(conditions, updated):
            return
        self.store.patch(
            "v1/pods",
            metadata["name"],
            {"status": {"conditions": updated}},
            namespace=metadata["namespace"],
            subresource="status",
        )
        if placement.reason == "Unschedulable" and (previous or {}).get("message") != placement.message:
            self.plane.record_event(pod, "FailedScheduling", placement.message, warning=True, component=self.component)


def _unschedulable(placement: Any, message: str) -> Placement:
    return Placement(placement.pod, None, "Unschedulable", message)


def _find(objects: list[Obj], name: str) -> Obj | None:
    return next((obj for obj in objects if obj["metadata"]["name"] == name), None)


def bind(store: Any, pod: Obj, node_name: str) -> None:
    """Bind ``pod`` to ``node_name`` through the ``pods/binding`` subresource (``Store.bind_pod``).

    The binding sets ``spec.nodeName`` and ``PodScheduled=True``, as the upstream binding REST handler does.
    """
    metadata = pod["metadata"]
    store.bind_pod(metadata["namespace"], metadata["name"], node_name)

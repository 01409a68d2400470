"""Gang scheduling of PodGroups (KEP-4671, ``scheduling.k8s.io/v1beta1``), as the v1.37 kube-scheduler does it.

A pod names its group in ``spec.schedulingGroup.podGroupName``; the PodGroup's
``spec.schedulingPolicy.gang.minCount`` makes the group all-or-nothing. Upstream
(``pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go`` and
``pkg/scheduler/schedule_one_podgroup.go`` in k8s.io/kubernetes v1.37.2):

- **PreEnqueue**: a pod whose PodGroup does not exist yet, or whose group has fewer than ``minCount``
  pods, does not enter the scheduling queue (no condition is written: it is simply not tried).
- **Pod group scheduling cycle**: the group's queued pods are placed together against one snapshot.
  If at least ``minCount`` of the group (already bound ones included) can be placed, the placed pods
  are bound - in that one cycle - and the others stay pending as unschedulable; otherwise *none* is
  bound and every queued pod of the group is unschedulable.
- **Status**: the PodGroup's ``PodGroupInitiallyScheduled`` condition is set ``True``/``Scheduled`` on
  success, ``False``/``Unschedulable`` with the scheduler's message otherwise. Once ``True`` it is
  terminal and never reverts (``scheduling/v1beta1/types.go``), so later passes leave it alone.
- A PodGroup whose policy is ``basic`` (or a pod whose group has no gang policy) is scheduled pod by
  pod like any other pod.
- **Topology** (KEP-5732, gate ``TopologyAwareWorkloadScheduling``, alpha, off by default: the
  apiserver drops ``spec.schedulingConstraints`` without it, ``gang_sim.apiserver.feature_gates``):
  a gang whose PodGroup has ``spec.schedulingConstraints.topology: [{key: <node label>}]`` is placed
  whole in one domain of that label or not at all (:func:`plan_topology_group`). The
  ``TopologyPlacementGenerator`` plugin makes one *placement* per value of the label among the nodes
  (only the value of the group's already bound pods, if any; nodes without the label belong to
  none, ``pkg/scheduler/framework/plugins/topologyaware/topology_placement.go``); the group is
  tried in each (``podGroupSchedulingPlacementAlgorithm``, ``schedule_one_podgroup.go``); of the
  placements where ``minCount`` fit, the best score wins: ``PodGroupPodsCount`` (the group's pods
  placed, normalised to 0-100 by the best) plus ``NodeResourcesFit`` *MostAllocated* over the
  placement's nodes (cpu and memory requested, the group's included, over allocatable, 0-100), weight
  1 each. None: the PodGroup's condition is ``False/Unschedulable`` with the v1.37 message, ``pod group
  is unschedulable, 0/<n> placements are available, first placement status: minCount (<m>) cannot be
  satisfied: <s> scheduled, <r> remaining, pod group preemption: No preemption victims found for
  incoming preemptor`` (the placement-by-placement status, ``GangScheduling.PlacementFeasible``'s
  message where the first placement's pod loop stopped, the pod group PostFilter's); each queued pod
  carries ``pod group is unschedulable, `` and that message. No node with the label: ``no feasible
  placements found`` (the PodGroup: with the PostFilter's words after it).

Not modelled: the Permit stage's 5-minute wait (``permitTimeoutDuration``) - this emulator places the
whole group in one pass, so no pod ever waits at Permit for a peer; workload-aware preemption (the
``DisruptionTarget`` condition) and CompositePodGroups; the apiserver's defaulting of a PodGroup's
``spec.disruptionMode`` (``{single: {}}``) and ``spec.priority`` (0), which a real v1.37 apiserver adds
on create (read back from one started with the gate); of topology placement, the random tie-break
between equally scored placements (here: the domain value first in name order), which placement's
failure the message reports (upstream: the first in map order, here: in name order), the message
each pod carries (upstream: a pod that did not fit in the reported placement carries its own
``0/<n> nodes are available`` fit error, and it changes with every retried cycle), and
``NonZeroRequested`` defaults for pods without requests in the score.

:func:`plan_group` and :func:`plan_topology_group` are pure: they take the pods, nodes and usage and
return what to write.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gang_sim.controllers import fit
from gang_sim.world.resources import Resources, pod_requests

Obj = dict[str, Any]

POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
NO_PLACEMENT = "no feasible placements found"
GROUP_UNSCHEDULABLE = "pod group is unschedulable"
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"
"""What the pod group PostFilter (``DefaultPreemption``) appends when preempting would not help."""
MAX_SCORE = 100


def group_name(pod: Mapping[str, Any]) -> str | None:
    """The PodGroup a pod belongs to (``spec.schedulingGroup.podGroupName``), or ``None``."""
    group = ((pod.get("spec") or {}).get("schedulingGroup")) or {}
    name = group.get("podGroupName")
    return str(name) if name else None


def gang_min_count(pod_group: Mapping[str, Any]) -> int | None:
    """``minCount`` of a gang policy, ``None`` for a basic (or missing) policy."""
    gang = (((pod_group.get("spec") or {}).get("schedulingPolicy")) or {}).get("gang")
    if not isinstance(gang, Mapping):
        return None
    return int(gang.get("minCount") or 0)


def topology_key(pod_group: Mapping[str, Any]) -> str | None:
    """The node label of the PodGroup's topology constraint (``spec.schedulingConstraints.topology[0]``)."""
    constraints = ((pod_group.get("spec") or {}).get("schedulingConstraints")) or {}
    topology = constraints.get("topology") or []
    return str(topology[0]["key"]) if topology and topology[0].get("key") else None


def initially_scheduled(pod_group: Mapping[str, Any]) -> bool:
    return any(
        item.get("type") == INITIALLY_SCHEDULED and item.get("status") == "True"
        for item in ((pod_group.get("status") or {}).get("conditions")) or []
    )


@dataclass(frozen=True)
class GroupPlan:
    """What one pod group scheduling cycle decided.

    ``placements`` are the scheduler's :class:`gang_sim.controllers.scheduler.Placement` values to
    apply (bindings, or unschedulable pods with their message); ``usage`` is the node usage after the
    cycle (the input usage when nothing was bound); ``condition`` is ``(status, reason, message)`` for
    ``PodGroupInitiallyScheduled``, ``None`` when the PodGroup's status stays as it is.
    """

    placements: tuple[Any, ...]
    usage: dict[str, Any]
    condition: tuple[str, str, str] | None


def plan_group(
    pod_group: Mapping[str, Any],
    queued: Sequence[Obj],
    bound: int,
    *,
    place: Callable[[list[Obj], dict[str, Any]], list[Any]],
    usage: dict[str, Any],
    unschedulable: Callable[[Any, str], Any],
) -> GroupPlan:
    """One cycle for the gang ``pod_group``: ``queued`` are its pending pods (past PreEnqueue),
    ``bound`` how many of its pods are already bound. ``place(pods, usage)`` places pods against a
    usage it may change; ``unschedulable(placement, message)`` turns a placement into an unschedulable
    one with ``message``."""
    min_count = gang_min_count(pod_group) or 0
    trial = copy.deepcopy(usage)
    placements = place(list(queued), trial)
    placed = [placement for placement in placements if placement.node is not None]
    if bound + len(placed) >= min_count:
        condition = None if initially_scheduled(pod_group) else ("True", "Scheduled", "")
        return GroupPlan(tuple(placements), trial, condition)
    failure = next((placement.message for placement in placements if placement.node is None), "")
    message = (
        f"pod group {pod_group['metadata']['name']}: only {bound + len(placed)} of the {min_count} pods "
        f"its gang policy needs (minCount) fit at once; {failure}"
    )
    gated = [placement for placement in placements if placement.reason == "SchedulingGated"]
    rejected = tuple(placement if placement in gated else unschedulable(placement, message) for placement in placements)
    condition = None if initially_scheduled(pod_group) else ("False", "Unschedulable", message)
    return GroupPlan(rejected, usage, condition)


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def placements(
    key: str, nodes: Sequence[Obj], bound_nodes: Sequence[str]
) -> tuple[list[tuple[str, list[Obj]]], str | None]:
    """``TopologyPlacementGenerator``: ``(domain value, its nodes)`` in name order, or why none can be
    made (the bound pods' nodes are gone, lack the label or span two domains: a scheduler error)."""
    by_name = {node["metadata"]["name"]: node for node in nodes}
    required: str | None = None
    for name in bound_nodes:
        node = by_name.get(name)
        if node is None:
            return [], f"getting node for pod: nodeinfo not found for node name {name!r}"
        domain = _labels(node).get(key)
        if domain is None:
            return [], "no topology domain found for pod"
        if required is not None and domain != required:
            return [], f"more than 1 domain found for pod group: {required}, {domain}"
        required = domain
    domains: dict[str, list[Obj]] = {}
    for node in nodes:
        domain = _labels(node).get(key)
        if domain is not None and required in (None, domain):
            domains.setdefault(domain, []).append(node)
    return sorted(domains.items()), None


def _most_allocated(nodes: Sequence[Obj], proposed: Sequence[Obj], usage: Mapping[str, Resources]) -> int:
    """``NodeResourcesFit``'s placement score, MostAllocated over cpu and memory (weight 1 each)."""
    scores = []
    for resource in ("cpu", "memory"):
        allocatable = sum((fit.allocatable(node).get(resource, Fraction(0)) for node in nodes), Fraction(0))
        if allocatable == 0:
            continue
        requested = sum(
            (usage.get(node["metadata"]["name"], {}).get(resource, Fraction(0)) for node in nodes), Fraction(0)
        )
        requested += sum(
            (pod_requests(pod.get("spec") or {}).get(resource, Fraction(0)) for pod in proposed), Fraction(0)
        )
        scores.append(int(min(requested, allocatable) * MAX_SCORE / allocatable))
    return sum(scores) // len(scores) if scores else 0


@dataclass(frozen=True)
class _Candidate:
    """A placement where the gang fits: its domain, how many of the group's pods it holds, its
    ``NodeResourcesFit`` score, the scheduler's placements and the usage after them."""

    domain: str
    pods: int
    fit_score: int
    placements: tuple[Any, ...]
    usage: dict[str, Any]


def plan_topology_group(
    pod_group: Mapping[str, Any],
    queued: Sequence[Obj],
    bound_nodes: Sequence[str],
    nodes: Sequence[Obj],
    *,
    place: Callable[[list[Obj], list[Obj], dict[str, Any]], list[Any]],
    usage: dict[str, Any],
    unschedulable: Callable[[Any, str], Any],
) -> GroupPlan:
    """One cycle for a gang with a topology constraint (module docstring): ``bound_nodes`` are the
    nodes of its pods already bound; ``place(pods, nodes, usage)`` places pods on ``nodes`` only."""
    min_count = gang_min_count(pod_group) or 0
    domains, error = placements(topology_key(pod_group) or "", nodes, bound_nodes)
    if error is not None:
        return _rejected(pod_group, queued, usage, unschedulable, ("False", "SchedulerError", error), error)
    if not domains:
        outcome = ("False", "Unschedulable", f"{NO_PLACEMENT}, {NO_VICTIMS}")
        return _rejected(pod_group, queued, usage, unschedulable, outcome, NO_PLACEMENT)
    candidates, first_failure = [], ""
    for domain, members in domains:
        trial = copy.deepcopy(usage)
        tried = place(list(queued), members, trial)
        proposed = [placement.pod for placement in tried if placement.node is not None]
        if len(bound_nodes) + len(proposed) >= min_count:
            score = _most_allocated(members, proposed, usage)
            candidates.append(_Candidate(domain, len(bound_nodes) + len(proposed), score, tuple(tried), trial))
        elif not first_failure:
            first_failure = min_count_failure(tried, len(bound_nodes), min_count)
    if not candidates:
        failed = (
            f"{GROUP_UNSCHEDULABLE}, 0/{len(domains)} placements are available, first placement status: {first_failure}"
        )
        outcome = ("False", "Unschedulable", f"{failed}, {NO_VICTIMS}")
        return _rejected(pod_group, queued, usage, unschedulable, outcome, f"{GROUP_UNSCHEDULABLE}, {outcome[2]}")
    most = max(candidate.pods for candidate in candidates)
    # max() keeps the first of equal scores: the domain first in name order (upstream draws at random)
    best = max(candidates, key=lambda item: item.pods * MAX_SCORE // most + item.fit_score)
    condition = None if initially_scheduled(pod_group) else ("True", "Scheduled", "")
    return GroupPlan(best.placements, best.usage, condition)


def min_count_failure(tried: Sequence[Any], scheduled: int, min_count: int) -> str:
    """``GangScheduling.PlacementFeasible``'s message where the placement's pod-by-pod loop stopped:
    ``minCount (7) cannot be satisfied: 2 scheduled, 4 remaining`` (``gangscheduling.go``)."""
    queued = [placement for placement in tried if placement.reason != "SchedulingGated"]
    remaining = len(queued)
    for placement in [None, *queued]:
        if placement is not None:
            remaining -= 1
            scheduled += placement.node is not None
        if scheduled + remaining < min_count:
            break
    return f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"


def _rejected(
    pod_group: Mapping[str, Any],
    queued: Sequence[Obj],
    usage: dict[str, Any],
    unschedulable: Callable[[Any, str], Any],
    outcome: tuple[str, str, str],
    message: str,
) -> GroupPlan:
    """Nothing bound: every queued pod unschedulable with ``message``, the PodGroup with ``outcome``
    (gated pods stay as they are: scheduling gates keep a pod out of the queue)."""
    rejected = tuple(
        unschedulable(_Unplaced(pod), message) for pod in queued if not (pod.get("spec") or {}).get("schedulingGates")
    )
    condition = None if initially_scheduled(pod_group) else outcome
    return GroupPlan(rejected, usage, condition)


@dataclass(frozen=True)
class _Unplaced:
    """A pod no placement took (what ``unschedulable`` turns into the scheduler's Placement)."""

    pod: Obj
    node: None = None
    reason: str = "Unschedulable"
    message: str = ""

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

Not modelled: the Permit stage's 5-minute wait (``permitTimeoutDuration``) - this emulator places the
whole group in one pass, so no pod ever waits at Permit for a peer; workload-aware preemption (the
``DisruptionTarget`` condition) and CompositePodGroups; topology constraints; the apiserver's
defaulting of a PodGroup's ``spec.disruptionMode`` (``{single: {}}``) and ``spec.priority`` (0),
which a real v1.37 apiserver adds on create (read back from one started with the gate).

:func:`plan_group` is pure: it takes the pods, nodes and usage and returns what to write.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"


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

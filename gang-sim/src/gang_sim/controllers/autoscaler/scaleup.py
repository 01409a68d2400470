"""Pure capacity simulation for the autoscaler: pack pods onto nodes, plan node-group increases.

Like the cluster-autoscaler's scheduling simulation (``simulator/``), a *bin* is a node (real, still
provisioning, or a template of a node group) with its free resources; pods are packed first-fit in
the given order using the scheduler's own filters (:mod:`fit`), so the autoscaler and the scheduler
agree about what fits where.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gang_sim.controllers import fit
from gang_sim.world.resources import Resources, pod_requests, subtract

PodSpec = Mapping[str, Any]


@dataclass
class Bin:
    """A node in the simulation: its object (labels, taints) and what is still free on it."""

    node: Mapping[str, Any]
    free: Resources

    @classmethod
    def empty(cls, node: Mapping[str, Any]) -> Bin:
        return cls(node, dict(fit.allocatable(node)))

    def try_place(self, spec: PodSpec, requests: Mapping[str, Fraction] | None = None) -> bool:
        requests = pod_requests(spec) if requests is None else requests
        capacity = fit.allocatable(self.node)
        used = subtract(capacity, self.free)
        if fit.fit_failures(spec, requests, self.node, used):
            return False
        self.free = subtract(self.free, requests)
        return True


def pack(pods: Sequence[PodSpec], bins: Sequence[Bin]) -> list[PodSpec]:
    """Place ``pods`` first-fit into ``bins`` (mutated); return the pods that fit nowhere."""
    unplaced: list[PodSpec] = []
    for spec in pods:
        requests = pod_requests(spec)
        if not any(target.try_place(spec, requests) for target in bins):
            unplaced.append(spec)
    return unplaced


@dataclass(frozen=True)
class GroupOption:
    """A node group the planner may grow: a template node and how many nodes it may still add."""

    name: str
    template: Mapping[str, Any]
    headroom: int


def nodes_needed(pods: Sequence[PodSpec], group: GroupOption, limit: int | None = None) -> tuple[int, list[PodSpec]]:
    """Fresh template nodes of ``group`` needed for ``pods`` (at most ``limit``); and the pods left over."""
    limit = group.headroom if limit is None else min(limit, group.headroom)
    remaining = list(pods)
    bins: list[Bin] = []
    while remaining and len(bins) < limit:
        candidate = Bin.empty(group.template)
        left = [spec for spec in remaining if not candidate.try_place(spec)]
        if len(left) == len(remaining):
            break
        bins.append(candidate)
        remaining = left
    return len(bins), remaining


def plan_atomic(pods: Sequence[PodSpec], groups: Sequence[GroupOption]) -> tuple[str, int] | None:
    """All-or-nothing: the group and node count that fits *every* pod, fewest nodes first; else None.

    Mirrors ``best-effort-atomic-scale-up`` with one node group per request (``AtomicIncreaseSize``).
    """
    best: tuple[int, str] | None = None
    for group in groups:
        count, left = nodes_needed(pods, group)
        if left or count == 0:
            continue
        if best is None or (count, group.name) < best:
            best = (count, group.name)
    return None if best is None else (best[1], best[0])


def could_ever_fit(pods: Sequence[PodSpec], groups: Sequence[GroupOption], max_size: Callable[[str], int]) -> bool:
    """Whether some group at its maximum size could hold every pod (else queued requests fail)."""
    for group in groups:
        sized = GroupOption(group.name, group.template, max_size(group.name))
        count, left = nodes_needed(pods, sized)
        if not left and count > 0:
            return True
    return False


def plan_incremental(pods: Sequence[PodSpec], groups: Sequence[GroupOption], budget: int) -> list[tuple[str, int]]:
    """Ordinary scale-up under a node budget: groups are tried in name order, each as far as it helps."""
    plan: list[tuple[str, int]] = []
    remaining = list(pods)
    for group in sorted(groups, key=lambda option: option.name):
        if budget <= 0 or not remaining:
            break
        count, left = nodes_needed(remaining, group, budget)
        if count:
            plan.append((group.name, count))
            budget -= count
            remaining = left
    return plan

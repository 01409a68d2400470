"""Kueue's Topology Aware Scheduling placement: where in a topology a PodSet's pods go. Pure.

Follows kubernetes-sigs/kueue v0.17.0 ``pkg/cache/scheduler/tas_flavor_snapshot.go``
(``findTopologyAssignment``) with Kueue 0.17's default gates (``TASProfileMixed`` on,
``TASBalancedPlacement`` and ``TASMultiLayerTopology`` off), for one PodSet with no leader and
no slices:

1. **The tree.** Each node of the flavor (:class:`TopologySnapshot`) is a leaf under its level
   values (block, rack, ..., ``kubernetes.io/hostname``); with ``kubernetes.io/hostname`` as the
   lowest level a leaf is one node, else the nodes of a lowest-level domain are summed into one leaf.
2. **Counts.** A leaf's *state* is how many of the PodSet's pods fit in what is free on it:
   allocatable, minus the requests of the non-TAS pods bound there, minus the TAS usage of admitted
   Workloads' assignments, minus what was assumed earlier in the pass; per resource
   ``free // per-pod request`` (a pod also takes one ``pods``), the smallest wins. When the lowest
   level is the hostname a node is first excluded for an untolerated ``NoSchedule``/``NoExecute``
   taint (PodSet plus flavor tolerations), a ``nodeSelector`` or required node affinity it does not
   match. A parent's state is the sum of its children's.
3. **The level.** At the requested level, domains are sorted (most pods first, then by level values)
   and, when the largest can hold the PodSet, the one that holds it with the least room to spare is
   taken (*BestFit*). ``required``: none can hold it -> the PodSet does not fit, with
   :func:`not_fit_message`. ``preferred``: go one level up and try again; at the top, the PodSet is
   spread over as few top domains as the sorted order gives (BestFit for the last one). An
   ``unconstrained`` (or implied) PodSet works at the lowest level with *LeastFreeCapacity*: the
   fullest domain that still holds it, else the domains from the fullest on.
4. **Down.** Level by level, the chosen domains' children are sorted the same way and filled in
   order, the last one by BestFit; the result is a list of lowest-level domains with pod counts,
   sorted by their level values (so consecutive ranks share racks), hostnames only when the lowest
   level is the hostname (``buildAssignment``).

Not modelled: PodSet slices (``podset-slice-*`` annotations), leader/worker PodSet groups
(``podset-group-name``), balanced placement, failed-node replacement, elastic workload slices, the
second "simulate empty" pass that only decides between preemption and NoFit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gang_sim.controllers import fit
from gang_sim.world.resources import Resources, add, subtract

HOSTNAME = "kubernetes.io/hostname"


def domain_id(values: Sequence[str]) -> str:
    """Kueue's ``TopologyDomainID``: the level values joined with commas."""
    return ",".join(values)


@dataclass
class Leaf:
    """A lowest-level domain: its level values, its node (hostname topologies only) and capacity."""

    values: tuple[str, ...]
    node: Mapping[str, Any] | None
    free: Resources
    """Allocatable minus the non-TAS pods' requests."""

    @property
    def id(self) -> str:
        """Kueue's leaf id: the hostname for hostname topologies, else all level values joined."""
        return self.values[-1] if self.node is not None else domain_id(self.values)


@dataclass(frozen=True)
class TopologySnapshot:
    """One TAS flavor at one instant: its Topology's levels and its nodes' leaves."""

    name: str
    """The Topology's name (for messages)."""
    levels: tuple[str, ...]
    leaves: tuple[Leaf, ...]
    tolerations: tuple[Mapping[str, Any], ...] = ()
    """The flavor's tolerations."""
    usage: Mapping[str, Resources] = field(default_factory=dict)
    """TAS usage by leaf id: admitted Workloads' assignments, and those assumed in the pass."""

    @property
    def lowest_is_hostname(self) -> bool:
        return self.levels[-1] == HOSTNAME


@dataclass(frozen=True)
class PlacementRequest:
    """One PodSet's TAS request: ``level`` and its kind (``required``, ``preferred``, ``unconstrained``)."""

    count: int
    per_pod: Resources
    """Requests of one pod, ``pods: 1`` included."""
    kind: str
    level: str | None = None
    """The requested level; ``None`` for an unconstrained PodSet (the lowest level)."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Placement:
    """A TAS assignment: ``levels`` and, per domain in rank order, its level values and pod count."""

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]


@dataclass
class _Domain:
    values: tuple[str, ...]
    children: list[_Domain] = field(default_factory=list)
    state: int = 0


@dataclass
class _Exclusions:
    """Why nodes could not take a pod (``ExclusionStats``)."""

    total: int = 0
    node_selector: int = 0
    affinity: int = 0
    taints: Counter[str] = field(default_factory=Counter)
    resources: Counter[str] = field(default_factory=Counter)

    def text(self) -> str:
        reasons = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        reasons += [f'taint "{taint}": {count}' for taint, count in self.taints.items()]
        reasons += [f'resource "{resource}": {count}' for resource, count in self.resources.items()]
        return ", ".join(sorted(reasons))


def count_in(per_pod: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> tuple[int, str]:
    """How many pods fit in ``free`` and the limiting resource (``CountInWithLimitingResource``:
    the smallest count, ties to the first resource name; a requested resource absent is 0)."""
    best: tuple[int, str] | None = None
    for name in sorted(per_pod):
        amount = per_pod[name]
        if name not in free and amount != 0:
            return 0, name
        count = 2**31 - 1 if amount == 0 else int(free[name] / amount)  # Go's int64 division truncates
        if best is None or count < best[0]:
            best = (count, name)
    return best if best is not None else (0, "")


def _taint_text(taint: Mapping[str, Any]) -> str:
    """``v1.Taint.ToString()``: ``key=value:Effect``, ``key:Effect`` without a value."""
    value = taint.get("value") or ""
    return f"{taint.get('key', '')}{'=' + value if value else ''}:{taint.get('effect', '')}"


def _leaf_state(
    leaf: Leaf,
    snapshot: TopologySnapshot,
    request: PlacementRequest,
    assumed: Mapping[str, Resources],
    stats: _Exclusions,
) -> int:
    """Phase 1 for one leaf (module docstring, step 2)."""
    if leaf.node is not None:
        spec = {
            "tolerations": [*request.tolerations, *snapshot.tolerations],
            "nodeSelector": dict(request.node_selector),
            **({"affinity": dict(request.affinity)} if request.affinity else {}),
        }
        taint = fit.untolerated_taint(spec, leaf.node)
        if taint is not None:
            stats.taints[_taint_text(taint)] += 1
            return 0
        labels = (leaf.node.get("metadata") or {}).get("labels") or {}
        if any(labels.get(key) != value for key, value in request.node_selector.items()):
            stats.node_selector += 1
            return 0
        if not fit.matches_node_affinity({"affinity": spec.get("affinity")}, leaf.node):
            stats.affinity += 1
            return 0
    remaining = subtract(subtract(leaf.free, snapshot.usage.get(leaf.id, {})), assumed.get(leaf.id, {}))
    state, limiting = count_in(request.per_pod, remaining)
    if state == 0 and limiting:
        stats.resources[limiting] += 1
    return state


def _tree(snapshot: TopologySnapshot, states: Mapping[tuple[str, ...], int]) -> list[dict[tuple[str, ...], _Domain]]:
    """The domains per level, leaves carrying ``states``, parents the sums of their children."""
    per_level: list[dict[tuple[str, ...], _Domain]] = [{} for _ in snapshot.levels]
    for leaf in snapshot.leaves:
        child = per_level[-1][leaf.values] = _Domain(leaf.values, state=states[leaf.values])
        for depth in range(len(snapshot.levels) - 2, -1, -1):
            values = leaf.values[: depth + 1]
            parent = per_level[depth].get(values)
            known = parent is not None
            if parent is None:
                parent = per_level[depth][values] = _Domain(values)
            parent.children.append(child)
            if known:
                break  # the rest of the chain up is linked already
            child = parent
    for depth in range(len(snapshot.levels) - 2, -1, -1):
        for domain in per_level[depth].values():
            domain.state = sum(child.state for child in domain.children)
    return per_level


def _sorted(domains: Iterable[_Domain], least_free_first: bool) -> list[_Domain]:
    """``sortedDomains``: BestFit most pods first, LeastFreeCapacity fewest first; then level values."""
    return sorted(domains, key=lambda item: (item.state if least_free_first else -item.state, item.values))


def _best_fit(domains: Sequence[_Domain], needed: int) -> _Domain:
    """``findBestFitDomain``: the first domain with the fewest pods >= ``needed`` (else the first)."""
    best = domains[0]
    for candidate in domains:
        if needed <= candidate.state < best.state:
            best = candidate
    return best


def _fill(domains: Sequence[_Domain], count: int, best_fit: bool) -> list[_Domain]:
    """``updateCountsToMinimum``: take domains in order until ``count`` pods are placed, setting each
    chosen domain's state to its share; the last one by BestFit."""
    chosen: list[_Domain] = []
    remaining = count
    for index, domain in enumerate(domains):
        if best_fit and domain.state >= remaining:
            domain = _best_fit(domains[index:], remaining)
        if domain.state >= remaining:
            domain.state = remaining
            chosen.append(domain)
            return chosen
        remaining -= domain.state
        chosen.append(domain)
    return chosen


def not_fit_message(topology: str, fitting: int, count: int, stats: _Exclusions | None = None) -> str:
    """``notFitMessage``: ``topology "t" allows to fit only 2 out of 4 pod(s)`` (or ``doesn't allow to
    fit any of``), then the nodes excluded and why."""
    if fitting == 0:
        text = f'topology "{topology}" doesn\'t allow to fit any of {count} pod(s)'
    else:
        text = f'topology "{topology}" allows to fit only {fitting} out of {count} pod(s)'
    reasons = stats.text() if stats is not None else ""
    return f"{text}. Total nodes: {stats.total}; excluded: {reasons}" if stats is not None and reasons else text


def _fit_level(
    per_level: list[dict[tuple[str, ...], _Domain]],
    level: int,
    request: PlacementRequest,
    snapshot: TopologySnapshot,
    stats: _Exclusions,
) -> tuple[int, list[_Domain]] | str:
    """``findLevelWithFitDomains``: the level and domains the PodSet goes to, or why it does not fit."""
    domains = list(per_level[level].values())
    if not domains:
        return f"no topology domains at level: {snapshot.levels[level]}"
    unconstrained = request.kind == "unconstrained"
    ordered = _sorted(domains, least_free_first=unconstrained)
    if unconstrained:
        for candidate in ordered:
            if candidate.state >= request.count:
                return level, [candidate]
        top = ordered[0]
    else:
        top = ordered[0]
        if top.state >= request.count:
            return level, [_best_fit(ordered, request.count)]
    if request.kind == "required":
        return not_fit_message(snapshot.name, top.state, request.count, stats)
    if level > 0 and not unconstrained:
        return _fit_level(per_level, level - 1, request, snapshot, stats)
    chosen, remaining = [], request.count
    for index, domain in enumerate(ordered):
        if remaining <= 0:
            break
        if not unconstrained and domain.state >= remaining:
            domain = _best_fit(ordered[index:], remaining)
        chosen.append(domain)
        remaining -= domain.state
    if remaining > 0:
        return not_fit_message(snapshot.name, request.count - remaining, request.count, stats)
    return level, chosen


def place(
    snapshot: TopologySnapshot, request: PlacementRequest, assumed: Mapping[str, Resources] | None = None
) -> Placement | str:
    """Where ``request``'s pods go in ``snapshot`` (module docstring), or Kueue's reason they do not fit.

    ``assumed``: TAS usage by leaf id taken earlier in the same pass (other PodSets, Workloads).
    """
    level_key = request.level or snapshot.levels[-1]
    if level_key not in snapshot.levels:
        return f"no requested topology level: {level_key}"
    stats = _Exclusions(total=len(snapshot.leaves))
    states = {leaf.values: _leaf_state(leaf, snapshot, request, assumed or {}, stats) for leaf in snapshot.leaves}
    per_level = _tree(snapshot, states)
    found = _fit_level(per_level, snapshot.levels.index(level_key), request, snapshot, stats)
    if isinstance(found, str):
        return found
    level, chosen = found
    best_fit = request.kind != "unconstrained"
    chosen = _fill(chosen, request.count, best_fit)
    for _ in range(level, len(snapshot.levels) - 1):
        children = _sorted((child for domain in chosen for child in domain.children), least_free_first=not best_fit)
        chosen = _fill(children, request.count, best_fit)
    chosen.sort(key=lambda domain: domain.values)
    first = len(snapshot.levels) - 1 if snapshot.lowest_is_hostname else 0
    return Placement(
        levels=snapshot.levels[first:],
        domains=tuple((domain.values[first:], domain.state) for domain in chosen if domain.state > 0),
    )


def usage_of(placement: Placement, per_pod: Mapping[str, Fraction]) -> dict[str, Resources]:
    """The TAS usage ``placement`` takes, by leaf id (``ComputeUsagePerDomain``: requests times the
    count, ``pods`` included once per pod)."""
    usage: dict[str, Resources] = {}
    for values, count in placement.domains:
        leaf = domain_id(values)
        usage[leaf] = add(usage.get(leaf, {}), per_pod, count)
    return usage

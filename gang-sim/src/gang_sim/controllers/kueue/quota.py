"""Pure Kueue quota accounting: flavor assignment, cohort borrowing and partial admission.

Follows ``pkg/scheduler/flavorassigner`` in simplified form (reference 2.3, 2.7):

- a podSet's resources are split by the ClusterQueue's ``resourceGroups``; for each group the flavors
  are tried in order and the first one that fits *every* covered resource the podSet requests wins
  (``whenCanBorrow: MayStopSearch``: a flavor that fits by borrowing is taken);
- a flavor is skipped when its ``nodeLabels`` contradict the pod's ``nodeSelector`` or its
  ``nodeTaints`` are not tolerated, or when Topology Aware Scheduling refuses it for the podSet
  (:attr:`PodSetRequest.refused`, from :func:`.tas.flavor_refusals`);
- an ``accept`` callback may refuse a podSet's count on a flavor after its quota fits (the TAS
  placement, :mod:`.tas_placement`): the podSet then does not fit at that count, and no other flavor
  is tried for it, as upstream assigns the topology after the flavors;
- a resource fits when ``requested <=`` what the cohort's nominal quota (all its ClusterQueues, this
  one included) leaves unused for that flavor and resource, capped at ``nominalQuota +
  borrowingLimit - used`` when the queue has a ``borrowingLimit`` (:func:`available`; ``lendingLimit``
  and hierarchical cohorts are not modelled);
- partial admission (``minCount``, from ``kueue.x-k8s.io/job-min-parallelism``): when the full count does
  not fit, the largest count >= minCount that fits is searched (binary search, as upstream).

Usage is keyed ``(clusterQueue, flavor, resource)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gang_sim.controllers.fit import tolerates
from gang_sim.world.resources import Resources, parse_quantity, pod_requests

Usage = dict[tuple[str, str, str], Fraction]


@dataclass(frozen=True)
class PodSetRequest:
    name: str
    count: int
    spec: Mapping[str, Any]
    min_count: int | None = None
    refused: Mapping[str, str] = field(default_factory=dict)
    """Flavors Topology Aware Scheduling refuses for this podSet, with why."""

    def per_pod(self) -> Resources:
        requests = pod_requests(self.spec)
        requests.pop("pods", None)
        return {name: amount for name, amount in requests.items() if amount > 0}


@dataclass(frozen=True)
class PodSetAssignment:
    name: str
    count: int
    flavors: dict[str, str]  # resource -> flavor
    usage: dict[str, Fraction]  # resource -> total


Accept = Callable[[PodSetRequest, PodSetAssignment], bool]
"""Whether a podSet may take an assignment whose quota fits (the TAS placement)."""


def flavor_matches(flavor: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    """Whether pods with ``spec`` could run on the flavor's nodes (labels and taints)."""
    flavor_spec = flavor.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    for key, value in (flavor_spec.get("nodeLabels") or {}).items():
        if key in selector and selector[key] != value:
            return False
    tolerations = list(spec.get("tolerations") or []) + list(flavor_spec.get("tolerations") or [])
    return all(
        tolerates(tolerations, taint)
        for taint in flavor_spec.get("nodeTaints") or []
        if taint.get("effect") in ("NoSchedule", "NoExecute")
    )


def nominal(queue: Mapping[str, Any], flavor: str, resource: str) -> tuple[Fraction, Fraction | None]:
    """``(nominalQuota, borrowingLimit)`` of ``queue`` for one flavor and resource (0 when absent)."""
    for group in (queue.get("spec") or {}).get("resourceGroups") or []:
        for entry in group.get("flavors") or []:
            if entry.get("name") != flavor:
                continue
            for item in entry.get("resources") or []:
                if item.get("name") == resource:
                    limit = item.get("borrowingLimit")
                    return parse_quantity(item.get("nominalQuota", "0")), None if limit is None else parse_quantity(
                        limit
                    )
    return Fraction(0), None


def available(
    queue: Mapping[str, Any], cohort: Sequence[Mapping[str, Any]], usage: Usage, flavor: str, resource: str
) -> Fraction:
    """Quota ``queue`` can still use for ``flavor``/``resource``, including what it may borrow.

    As upstream ``pkg/cache`` ``resource_node.go`` ``available()`` without ``lendingLimit`` (so no
    guaranteed quota): what the cohort's nominal quota leaves unused by *all* its ClusterQueues (quota a
    queue lent out is not free to it again), capped for a queue with ``borrowingLimit`` at its nominal
    quota plus that limit minus its own usage.
    """
    name = queue["metadata"]["name"]
    own, borrowing_limit = nominal(queue, flavor, resource)
    used = usage.get((name, flavor, resource), Fraction(0))
    members = {item["metadata"]["name"]: item for item in cohort}
    members[name] = queue
    cohort_free = sum(
        (
            nominal(member, flavor, resource)[0] - usage.get((member_name, flavor, resource), Fraction(0))
            for member_name, member in members.items()
        ),
        Fraction(0),
    )
    if borrowing_limit is not None:
        cohort_free = min(cohort_free, own + borrowing_limit - used)
    return max(Fraction(0), cohort_free)


def _assign_count(
    request: PodSetRequest,
    count: int,
    queue: Mapping[str, Any],
    cohort: Sequence[Mapping[str, Any]],
    flavors: Mapping[str, Mapping[str, Any]],
    usage: Usage,
    accept: Accept | None = None,
) -> PodSetAssignment | None:
    per_pod = request.per_pod()
    chosen: dict[str, str] = {}
    for group in (queue.get("spec") or {}).get("resourceGroups") or []:
        covered = [resource for resource in group.get("coveredResources") or [] if resource in per_pod]
        if not covered:
            continue
        for entry in group.get("flavors") or []:
            flavor_name = entry.get("name", "")
            flavor = flavors.get(flavor_name)
            if flavor is None or flavor_name in request.refused or not flavor_matches(flavor, request.spec):
                continue
            if all(
                per_pod[resource] * count <= available(queue, cohort, usage, flavor_name, resource)
                for resource in covered
            ):
                chosen.update({resource: flavor_name for resource in covered})
                break
        else:
            return None
    if set(per_pod) - set(chosen):
        return None  # a requested resource no resource group covers
    assignment = PodSetAssignment(
        request.name, count, chosen, {resource: amount * count for resource, amount in per_pod.items()}
    )
    return assignment if accept is None or accept(request, assignment) else None


def assign(
    requests: list[PodSetRequest],
    queue: Mapping[str, Any],
    cohort: Sequence[Mapping[str, Any]],
    flavors: Mapping[str, Mapping[str, Any]],
    usage: Usage,
    accept: Accept | None = None,
) -> list[PodSetAssignment] | None:
    """Assign flavors to every podSet (with partial admission when allowed); None if it cannot fit."""
    working = dict(usage)
    result: list[PodSetAssignment] = []
    name = queue["metadata"]["name"]
    for request in requests:
        assignment = _assign_count(request, request.count, queue, cohort, flavors, working, accept)
        if assignment is None and request.min_count is not None and request.min_count < request.count:
            low, high = request.min_count, request.count - 1
            while low <= high:
                middle = (low + high) // 2
                candidate = _assign_count(request, middle, queue, cohort, flavors, working, accept)
                if candidate is None:
                    high = middle - 1
                else:
                    assignment, low = candidate, middle + 1
        if assignment is None:
            return None
        for resource, amount in assignment.usage.items():
            key = (name, assignment.flavors[resource], resource)
            working[key] = working.get(key, Fraction(0)) + amount
        result.append(assignment)
    return result


def add_usage(usage: Usage, queue_name: str, assignments: list[Mapping[str, Any]]) -> None:
    """Add a workload's ``status.admission.podSetAssignments`` to ``usage``."""
    for assignment in assignments:
        for resource, amount in (assignment.get("resourceUsage") or {}).items():
            flavor = (assignment.get("flavors") or {}).get(resource)
            if flavor is None:
                continue
            key = (queue_name, flavor, resource)
            usage[key] = usage.get(key, Fraction(0)) + parse_quantity(amount)

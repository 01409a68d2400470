"""Why a Workload gets no quota: the ``QuotaReserved=False`` reason and message, as Kueue 0.20 writes them.

Kueue 0.20 turns ``UnadmittedWorkloadsObservability`` on by default (kubernetes-sigs/kueue
``CHANGELOG/CHANGELOG-0.20.md``, #13063): the condition's reason is typed - ``WaitingForQuota`` when
the ClusterQueue (with its cohort) could fit the podSet once other workloads release quota,
``ExceedsMaxQuota`` when even an idle ClusterQueue and cohort could not (the request is above the
maximum capacity), ``NoMatchingFlavor`` when no flavor's node labels and taints suit the pods (message
worded here, upstream names each flavor's mismatch), besides ``Inadmissible`` for a missing queue or
check. Messages follow
``pkg/scheduler/flavorassigner`` (``couldn't assign flavors to pod set main: insufficient quota for
nvidia.com/gpu in flavor a100, request > maximum capacity (32 > 16)``; ``... insufficient unused quota
for nvidia.com/gpu in flavor a100, 8 more needed``). Only the first podSet and flavor that fail are
named (upstream lists every flavor tried). Flavors Topology Aware Scheduling refuses to a podSet
(:attr:`.quota.PodSetRequest.refused`) are named with Kueue 0.17's words, ``NoMatchingFlavor``:
``couldn't assign flavors to pod set main: Flavor "gpu" does not support TopologyAwareScheduling``.
A podSet whose quota fits but whose topology does not is not described here but by
:mod:`.tas_admission`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from gang_sim.controllers.kueue import quota
from gang_sim.world.resources import format_quantity

WAITING_FOR_QUOTA = "WaitingForQuota"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"


def reason_and_message(
    requests: Sequence[quota.PodSetRequest],
    queue: Mapping[str, Any],
    cohort: Sequence[Mapping[str, Any]],
    flavors: Mapping[str, Mapping[str, Any]],
    usage: quota.Usage,
) -> tuple[str, str]:
    """``(reason, message)`` for requests :func:`quota.assign` could not fit into ``queue`` now."""
    for request in requests:
        names = [
            entry.get("name", "")
            for group in (queue.get("spec") or {}).get("resourceGroups") or []
            for entry in group.get("flavors") or []
        ]
        if not any(
            name in flavors and name not in request.refused and quota.flavor_matches(flavors[name], request.spec)
            for name in names
        ):
            if request.refused:
                reasons = ", ".join(sorted(request.refused.values()))
                return NO_MATCHING_FLAVOR, f"couldn't assign flavors to pod set {request.name}: {reasons}"
            tried = ", ".join(names) or "none"
            return NO_MATCHING_FLAVOR, (
                f"couldn't assign flavors to pod set {request.name}: no flavor of ClusterQueue "
                f"{queue['metadata']['name']} matches the pods' node selector and tolerations (flavors: {tried})"
            )
    if quota.assign(list(requests), queue, cohort, flavors, {}) is None:
        reason, usage_seen = EXCEEDS_MAX_QUOTA, {}
    else:
        reason, usage_seen = WAITING_FOR_QUOTA, usage
    for request in requests:
        detail = _first_shortfall(request, queue, cohort, flavors, usage_seen, maximum=reason == EXCEEDS_MAX_QUOTA)
        if detail is not None:
            return reason, f"couldn't assign flavors to pod set {request.name}: {detail}"
    covered = {
        resource
        for group in (queue.get("spec") or {}).get("resourceGroups") or []
        for resource in group.get("coveredResources") or []
    }
    for request in requests:
        for resource in sorted(set(request.per_pod()) - covered):
            return (
                reason,
                f"couldn't assign flavors to pod set {request.name}: resource {resource} unavailable in ClusterQueue",
            )
    name = requests[0].name if requests else "main"
    return reason, f"couldn't assign flavors to pod set {name}: insufficient unused quota in ClusterQueue " + str(
        queue["metadata"]["name"]
    )


def _first_shortfall(
    request: quota.PodSetRequest,
    queue: Mapping[str, Any],
    cohort: Sequence[Mapping[str, Any]],
    flavors: Mapping[str, Mapping[str, Any]],
    usage: quota.Usage,
    *,
    maximum: bool,
) -> str | None:
    per_pod = request.per_pod()
    count = request.min_count if request.min_count is not None else request.count
    for group in (queue.get("spec") or {}).get("resourceGroups") or []:
        for entry in group.get("flavors") or []:
            flavor_name = entry.get("name", "")
            flavor = flavors.get(flavor_name)
            if flavor is None or not quota.flavor_matches(flavor, request.spec):
                continue
            for resource in group.get("coveredResources") or []:
                if resource not in per_pod:
                    continue
                needed = per_pod[resource] * count
                free = quota.available(queue, cohort, usage, flavor_name, resource)
                if needed <= free:
                    continue
                if maximum:
                    return (
                        f"insufficient quota for {resource} in flavor {flavor_name}, request > maximum capacity "
                        f"({_shown(needed)} > {_shown(free)})"
                    )
                more = _shown(needed - free)
                return f"insufficient unused quota for {resource} in flavor {flavor_name}, {more} more needed"
    return None


def _shown(amount: Fraction) -> str:
    return format_quantity(amount)

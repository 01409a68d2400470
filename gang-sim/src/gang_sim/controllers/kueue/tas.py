"""Kueue's Topology Aware Scheduling around the placement: requests, flavors, snapshots, usage. Pure.

As kubernetes-sigs/kueue v0.17.0 (TAS beta, on by default since 0.14):

- **Requests.** A PodSet asks for TAS through its ``topologyRequest``, which the Job integration
  builds from the pod template's annotations ``kueue.x-k8s.io/podset-required-topology``,
  ``-preferred-topology`` or ``-unconstrained-topology`` (``pkg/controller/jobframework/tas.go``,
  :func:`topology_request`); a PodSet in a ClusterQueue whose every flavor is a TAS flavor gets TAS
  implicitly, unconstrained (``pkg/scheduler/flavorassigner/tas_flavorassigner.go``).
- **Flavors.** A TAS flavor has ``spec.topologyName``. A PodSet that requests TAS skips a flavor
  without a topology when the flavor's resource group covers a resource it requests ("does not
  support TopologyAwareScheduling"), one whose Topology lacks the requested level ("does not contain
  the requested level"); a PodSet without TAS skips a TAS flavor ("supports only
  TopologyAwareScheduling") - :func:`flavor_refusals`. A ClusterQueue with a TAS flavor whose Topology
  does not exist is inactive (``TopologyNotFound``, :func:`missing_topology`).
- **Snapshot.** A flavor's nodes are the Ready, schedulable nodes with its ``nodeLabels`` and every
  level's label (``pkg/cache/scheduler/tas_nodes_cache.go``, ``pkg/util/tas/node.go``); what is free on
  them is allocatable minus the requests of non-TAS pods bound there (pods without a TAS annotation,
  not terminated: ``pkg/controller/tas/non_tas_usage_controller.go``) minus the TAS usage of Workloads
  holding quota (:func:`workload_usage`) - :func:`snapshot`.
- **Assignment.** ``status.admission.podSetAssignments[].topologyAssignment`` in v1beta2's compact
  form, one slice with common prefixes and suffixes and universal values where it can
  (``pkg/util/tas/tas_assignment.go`` ``V1Beta2From``): :func:`to_api`, read back by :func:`domains_of`.

Not modelled: a PodSet's ``podset-slice-*`` and ``podset-group-name`` annotations (accepted and
ignored), delayed topology requests with a ProvisioningRequest admission check (the topology is
assigned with the quota), failed-node replacement (``kueue.x-k8s.io/node-to-replace``), MultiKueue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gang_sim.controllers.kueue import tas_placement
from gang_sim.controllers.kueue.tas_placement import Leaf, Placement, PlacementRequest, TopologySnapshot
from gang_sim.world.resources import Resources, add, parse_resources, pod_requests, subtract

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
PODSET_LABEL = "kueue.x-k8s.io/podset"
TOPOLOGIES = "kueue.x-k8s.io/v1beta2/topologies"
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
GROUP_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index"
TAS_ANNOTATIONS = (REQUIRED, PREFERRED, UNCONSTRAINED)
Obj = dict[str, Any]


def topology_request(annotations: Mapping[str, str], pod_index_label: str) -> dict[str, Any]:
    """The PodSet's ``topologyRequest`` from its template's annotations (``NewPodSetTopologyRequest``):
    the first of required, preferred, unconstrained, and always the integration's pod index label."""
    request: dict[str, Any] = {}
    if REQUIRED in annotations:
        request["required"] = annotations[REQUIRED]
    elif PREFERRED in annotations:
        request["preferred"] = annotations[PREFERRED]
    elif UNCONSTRAINED in annotations:
        request["unconstrained"] = annotations[UNCONSTRAINED].lower() in ("1", "t", "true")
    request["podIndexLabel"] = pod_index_label
    return request


def is_explicit(pod_set: Mapping[str, Any]) -> bool:
    """``IsExplicitlyRequestingTAS``: the PodSet's request names a mode."""
    request = pod_set.get("topologyRequest") or {}
    return any(key in request for key in ("required", "preferred", "unconstrained"))


def flavor_names(queue: Mapping[str, Any]) -> list[str]:
    return [
        entry.get("name", "")
        for group in (queue.get("spec") or {}).get("resourceGroups") or []
        for entry in group.get("flavors") or []
    ]


def is_tas_flavor(flavor: Mapping[str, Any] | None) -> bool:
    return bool(((flavor or {}).get("spec") or {}).get("topologyName"))


def is_tas_only(queue: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]) -> bool:
    """Every flavor of the ClusterQueue is a TAS flavor (``isTASOnly``)."""
    return all(is_tas_flavor(flavors.get(name)) for name in flavor_names(queue))


def is_requested(pod_set: Mapping[str, Any], tas_only: bool) -> bool:
    """Explicitly, or implied by a TAS-only ClusterQueue."""
    return is_explicit(pod_set) or tas_only


def levels(topology: Mapping[str, Any] | None) -> tuple[str, ...]:
    return tuple(str(level.get("nodeLabel", "")) for level in ((topology or {}).get("spec") or {}).get("levels") or [])


def missing_topology(
    queue: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]], topologies: Mapping[str, Mapping[str, Any]]
) -> list[tuple[str, str]]:
    """``(topology, flavor)`` for each TAS flavor of the ClusterQueue whose Topology does not exist."""
    missing = []
    for name in flavor_names(queue):
        topology = ((flavors.get(name) or {}).get("spec") or {}).get("topologyName")
        if topology and topology not in topologies:
            missing.append((str(topology), name))
    return missing


def requested_level(pod_set: Mapping[str, Any]) -> str | None:
    request = pod_set.get("topologyRequest") or {}
    return request.get("required") or request.get("preferred")


def flavor_refusals(
    pod_set: Mapping[str, Any],
    queue: Mapping[str, Any],
    flavors: Mapping[str, Mapping[str, Any]],
    topologies: Mapping[str, Mapping[str, Any]],
) -> dict[str, str]:
    """Flavor name -> why the PodSet cannot use it (``checkPodSetAndFlavorMatchForTAS``)."""
    tas_only = is_tas_only(queue, flavors)
    requested = set(pod_requests_of(pod_set))
    refusals: dict[str, str] = {}
    for group in (queue.get("spec") or {}).get("resourceGroups") or []:
        covered = set(group.get("coveredResources") or [])
        for entry in group.get("flavors") or []:
            name = entry.get("name", "")
            reason = _refusal(pod_set, name, flavors.get(name), tas_only, bool(covered & requested), topologies)
            if reason is not None:
                refusals[name] = reason
    return refusals


def _refusal(
    pod_set: Mapping[str, Any],
    name: str,
    flavor: Mapping[str, Any] | None,
    tas_only: bool,
    overlaps: bool,
    topologies: Mapping[str, Mapping[str, Any]],
) -> str | None:
    if flavor is None:
        return None
    topology_name = (flavor.get("spec") or {}).get("topologyName")
    if not is_requested(pod_set, tas_only):
        return f'Flavor "{name}" supports only TopologyAwareScheduling' if topology_name else None
    if tas_only and not is_explicit(pod_set):
        return None
    if not topology_name:
        return f'Flavor "{name}" does not support TopologyAwareScheduling' if overlaps else None
    if topology_name not in topologies:
        return f'Flavor "{name}" information missing in TAS cache'
    level = requested_level(pod_set)
    if level is not None and level not in levels(topologies[topology_name]):
        return f'Flavor "{name}" does not contain the requested level'
    return None


def pod_requests_of(pod_set: Mapping[str, Any]) -> Resources:
    """One pod's requests, ``pods: 1`` included (``NewRequestsFromPodSpec`` plus the pod)."""
    return pod_requests(((pod_set.get("template") or {}).get("spec")) or {})


def placement_request(
    pod_set: Mapping[str, Any], count: int, update: Mapping[str, Any] | None = None
) -> PlacementRequest:
    """What :func:`.tas_placement.place` needs of a PodSet (admission checks' ``update`` merged in)."""
    spec = ((pod_set.get("template") or {}).get("spec")) or {}
    request = pod_set.get("topologyRequest") or {}
    kind = "required" if "required" in request else ("preferred" if "preferred" in request else "unconstrained")
    update = update or {}
    return PlacementRequest(
        count=count,
        per_pod=pod_requests_of(pod_set),
        kind=kind,
        level=requested_level(pod_set),
        node_selector={**(spec.get("nodeSelector") or {}), **(update.get("nodeSelector") or {})},
        tolerations=(*(spec.get("tolerations") or []), *(update.get("tolerations") or [])),
        affinity=spec.get("affinity"),
    )


def is_tas_pod(pod: Mapping[str, Any]) -> bool:
    """``utiltas.IsTAS``: the pod carries a TAS annotation (its usage is its Workload's, not non-TAS)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return any(key in annotations for key in TAS_ANNOTATIONS)


def non_tas_usage(pods: Iterable[Mapping[str, Any]]) -> dict[str, Resources]:
    """Requests of the bound, non-terminated non-TAS pods, by node (one ``pods`` each)."""
    usage: dict[str, Resources] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed") or is_tas_pod(pod):
            continue
        usage[node] = add(usage.get(node, {}), pod_requests(pod.get("spec") or {}))
    return usage


def _is_ready(node: Mapping[str, Any]) -> bool:
    return any(
        item.get("type") == "Ready" and item.get("status") == "True"
        for item in (node.get("status") or {}).get("conditions") or []
    )


def snapshot(
    flavor: Mapping[str, Any],
    topology: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    non_tas: Mapping[str, Resources],
    usage: Mapping[str, Resources],
) -> TopologySnapshot:
    """The TAS snapshot of ``flavor`` (module docstring); ``usage`` is the flavor's TAS usage by leaf id."""
    level_keys = levels(topology)
    spec = flavor.get("spec") or {}
    node_labels = spec.get("nodeLabels") or {}
    by_hostname = level_keys[-1] == tas_placement.HOSTNAME
    leaves: dict[tuple[str, ...], Leaf] = {}
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if (node.get("spec") or {}).get("unschedulable") or not _is_ready(node):
            continue
        if any(labels.get(key) != value for key, value in node_labels.items()) or any(
            key not in labels for key in level_keys
        ):
            continue
        values = tuple(labels[key] for key in level_keys)
        status = node.get("status") or {}
        capacity = subtract(parse_resources(status.get("allocatable")), non_tas.get(node["metadata"]["name"], {}))
        if values in leaves and not by_hostname:
            leaves[values].free = add(leaves[values].free, capacity)
        else:
            leaves[values] = Leaf(values, node if by_hostname else None, capacity)
    return TopologySnapshot(
        name=str((topology.get("metadata") or {}).get("name", "")),
        levels=level_keys,
        leaves=tuple(leaves.values()),
        tolerations=tuple(spec.get("tolerations") or []),
        usage=usage,
    )


def workload_usage(workload: Mapping[str, Any]) -> dict[str, dict[str, Resources]]:
    """The TAS usage of a Workload's admission, by flavor and leaf id (``TASUsage``)."""
    usage: dict[str, dict[str, Resources]] = {}
    pod_sets = {item["name"]: item for item in (workload.get("spec") or {}).get("podSets") or []}
    for assignment in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        topology = assignment.get("topologyAssignment")
        pod_set = pod_sets.get(assignment.get("name"))
        if not topology or pod_set is None:
            continue
        flavors = sorted(set((assignment.get("flavors") or {}).values()))
        if not flavors:
            continue
        placement = Placement(tuple(topology.get("levels") or ()), tuple(domains_of(topology)))
        per_flavor = usage.setdefault(flavors[0], {})
        for leaf, amount in tas_placement.usage_of(placement, pod_requests_of(pod_set)).items():
            per_flavor[leaf] = add(per_flavor.get(leaf, {}), amount)
    return usage


def merge_usage(total: dict[str, dict[str, Resources]], more: Mapping[str, Mapping[str, Resources]]) -> None:
    """Add ``more`` (flavor -> leaf -> resources) to ``total``."""
    for flavor, leaves in more.items():
        target = total.setdefault(flavor, {})
        for leaf, amount in leaves.items():
            target[leaf] = add(target.get(leaf, {}), amount)


def _common_affixes(values: Sequence[str]) -> tuple[str, str]:
    """The longest common prefix and suffix of ``values`` that do not overlap in the shortest one
    (``fillSingleCompactSliceValues``)."""
    prefix, suffix = values[0], values[0]
    for value in values[1:]:
        while not value.startswith(prefix):
            prefix = prefix[:-1]
        while not value.endswith(suffix):
            suffix = suffix[1:]
    shortest = min(len(value) for value in values)
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[: shortest - len(suffix)]
    return prefix, suffix


def _level_values(values: Sequence[str]) -> dict[str, Any]:
    if all(value == values[0] for value in values):
        return {"universal": values[0]}
    prefix, suffix = _common_affixes(values)
    individual: dict[str, Any] = {}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = [value[len(prefix) : len(value) - len(suffix)] for value in values]
    return {"individual": individual}


def to_api(placement: Placement) -> dict[str, Any]:
    """``topologyAssignment`` in v1beta2's compact form (one slice)."""
    if not placement.domains:
        return {"levels": list(placement.levels), "slices": []}
    counts = [count for _, count in placement.domains]
    pod_counts = {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
    per_level = [
        _level_values([values[index] for values, _ in placement.domains]) for index in range(len(placement.levels))
    ]
    return {
        "levels": list(placement.levels),
        "slices": [{"domainCount": len(counts), "valuesPerLevel": per_level, "podCounts": pod_counts}],
    }


def domains_of(topology_assignment: Mapping[str, Any]) -> list[tuple[tuple[str, ...], int]]:
    """The ``(level values, pod count)`` of every domain of a v1beta2 ``topologyAssignment``, in order."""
    domains: list[tuple[tuple[str, ...], int]] = []
    for item in topology_assignment.get("slices") or []:
        size = int(item.get("domainCount", 0))
        counts = item.get("podCounts") or {}
        per_level = item.get("valuesPerLevel") or []
        for index in range(size):
            count = counts["universal"] if "universal" in counts else counts["individual"][index]
            values = tuple(_value_at(level, index) for level in per_level)
            domains.append((values, int(count)))
    return domains


def _value_at(level: Mapping[str, Any], index: int) -> str:
    if "universal" in level:
        return str(level["universal"])
    individual = level.get("individual") or {}
    return f"{individual.get('prefix', '')}{individual['roots'][index]}{individual.get('suffix', '')}"

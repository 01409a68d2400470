"""Whether the cluster can honour a gang's topology in its mode, asked before anything is created.

- **kueue**: Kueue places a PodSet by topology only through a Topology Aware Scheduling flavor - a
  ResourceFlavor whose ``spec.topologyName`` names a ``Topology`` - and only at one of that
  Topology's ``levels[].nodeLabel``; it skips a flavor without a topology for a PodSet that asks for
  one ("does not support TopologyAwareScheduling") and one whose Topology lacks the level ("does not
  contain the requested level"), sigs.k8s.io/kueue ``pkg/scheduler/flavorassigner/tas_flavorassigner.go``.
  So the gang's ClusterQueue (its LocalQueue's ``spec.clusterQueue``) is read, then every flavor of a
  resource group covering a resource the members request, then each flavor's Topology: when none
  has the gang's label as a level, the gang is refused naming the queue, each flavor and why
  (:func:`kueue_refusal`, pure).
- **workload**: the Workload API's topology constraint (KEP-5732, ``PodGroup.spec.schedulingConstraints``)
  exists only with the feature gate ``TopologyAwareWorkloadScheduling`` (alpha since v1.36, off by
  default). A server without it gives no error: its registry strategy drops the field from what it
  stores (k8s.io/kubernetes ``pkg/registry/scheduling/podgroup/strategy.go``,
  ``dropDisabledSchedulingConstraintsFields``). So the gang's PodGroup is created as a server-side dry
  run (``dryRun=All``: admitted, nothing stored, https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run)
  and the answer tells: the constraint kept, or dropped - then the gang is refused naming the gate.
  The scheduler needs the gate too; the API server only speaks for itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, POD_GROUPS, RESOURCE_FLAVORS, TOPOLOGIES
from airflow_provider_gang.reservation import manifests
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

FEATURE_GATE = "TopologyAwareWorkloadScheduling"
Object = Mapping[str, Any]


def _spec(obj: Object | None) -> Mapping[str, Any]:
    return (obj or {}).get("spec") or {}


def flavors_for(cluster_queue: Object, requested: Sequence[str]) -> list[str]:
    """The flavors of the ClusterQueue's resource groups that cover a resource in ``requested``."""
    names: dict[str, None] = {}
    for group in _spec(cluster_queue).get("resourceGroups") or []:
        if set(group.get("coveredResources") or []) & set(requested):
            names.update(dict.fromkeys(str(item.get("name", "")) for item in group.get("flavors") or []))
    return list(names)


def levels(topology: Object | None) -> list[str]:
    return [str(level.get("nodeLabel", "")) for level in _spec(topology).get("levels") or []]


def _flavor_problem(
    name: str, flavor: Object | None, topologies: Mapping[str, Object | None], label: str
) -> str | None:
    if flavor is None:
        return f"ResourceFlavor {name!r} does not exist"
    topology_name = _spec(flavor).get("topologyName")
    if not topology_name:
        return f"ResourceFlavor {name!r} has no topology (spec.topologyName)"
    topology = topologies.get(str(topology_name))
    if topology is None:
        return f"ResourceFlavor {name!r} names Topology {topology_name!r}, which does not exist"
    if label not in levels(topology):
        listed = ", ".join(levels(topology))
        return f"Topology {topology_name!r} of ResourceFlavor {name!r} has no level {label} (levels: {listed})"
    return None


def kueue_refusal(
    queue: str,
    cluster_queue: Object,
    flavors: Mapping[str, Object | None],
    topologies: Mapping[str, Object | None],
    *,
    label: str,
    requested: Sequence[str],
) -> str | None:
    """Why the ClusterQueue of LocalQueue ``queue`` (``namespace/name``) cannot place the gang by
    ``label``, naming each flavor's problem; ``None`` when one flavor can (module docstring)."""
    names = flavors_for(cluster_queue, requested)
    problems = [_flavor_problem(name, flavors.get(name), topologies, label) for name in names]
    if not names or any(problem is None for problem in problems):
        return None
    cluster_queue_name = (cluster_queue.get("metadata") or {}).get("name")
    return (
        f"LocalQueue {queue} (ClusterQueue {cluster_queue_name!r}) cannot place a gang by topology {label}: "
        f"{'; '.join(str(problem) for problem in problems)}. Kueue places a PodSet by topology only through a "
        f"flavor whose spec.topologyName names a Topology with the level {label}; set kueue_queue to a "
        "LocalQueue whose ClusterQueue has such a flavor, or give this one a Topology"
    )


async def _get_or_none(client: KubeClient, kind: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    try:
        return await client.get(kind, name, namespace)
    except errors.NotFound:
        return None


async def read_kueue_refusal(client: KubeClient, spec: GangSpec, requested: Sequence[str]) -> str | None:
    """Read the gang's LocalQueue, ClusterQueue, flavors and Topologies; :func:`kueue_refusal`.
    ``None`` too when the queue itself is missing (``hooks.cluster_fit`` says so first)."""
    label = spec.topology_label
    if label is None or spec.queue is None:
        return None
    local_queue = await _get_or_none(client, LOCAL_QUEUES, spec.queue, spec.namespace)
    target = _spec(local_queue).get("clusterQueue")
    cluster_queue = await _get_or_none(client, CLUSTER_QUEUES, str(target)) if target else None
    if cluster_queue is None:
        return None
    flavors = {
        name: await _get_or_none(client, RESOURCE_FLAVORS, name) for name in flavors_for(cluster_queue, requested)
    }
    topology_names = {
        str(_spec(flavor).get("topologyName")) for flavor in flavors.values() if _spec(flavor).get("topologyName")
    }
    topologies = {name: await _get_or_none(client, TOPOLOGIES, name) for name in sorted(topology_names)}
    return kueue_refusal(
        f"{spec.namespace}/{spec.queue}", cluster_queue, flavors, topologies, label=label, requested=requested
    )


def workload_refusal_of(answer: Object, label: str) -> str | None:
    """Why the Workload API cannot place the gang by ``label``: the dry-run answer dropped the constraint."""
    if _spec(answer).get("schedulingConstraints"):
        return None
    return (
        f"the API server dropped the topology constraint ({label}) from the gang's PodGroup "
        f"(spec.schedulingConstraints, a dry-run create): the feature gate {FEATURE_GATE} is off. It is "
        "alpha since Kubernetes 1.36 (KEP-5732); turn it on on kube-apiserver and kube-scheduler, or use "
        "reservation='kueue' or 'gates', which place a gang by topology without it"
    )


async def serves_workload_topology(client: KubeClient, spec: GangSpec) -> str | None:
    """Dry-run create ``spec``'s PodGroup with its topology constraint; the refusal, or ``None``.
    (The owner reference names no existing owner: a dry run stores nothing and checks no owner.)"""
    label = spec.required_topology
    if label is None:
        return None
    group = manifests.pod_group.pod_group(spec, owner_uid="dry-run")
    metadata = group["metadata"]
    metadata["generateName"] = f"{metadata.pop('name')}-"  # never AlreadyExists beside the gang's own
    answer = await client.request_json("POST", POD_GROUPS.path(spec.namespace), params={"dryRun": "All"}, body=group)
    return workload_refusal_of(answer if isinstance(answer, Mapping) else {}, label)


async def refusal(client: KubeClient, spec: GangSpec, requested: Sequence[str]) -> str | None:
    """Why ``spec``'s mode cannot honour its topology on this cluster, or ``None`` (module docstring)."""
    if spec.topology_label is None:
        return None
    if spec.mode is ReservationMode.KUEUE:
        return await read_kueue_refusal(client, spec, requested)
    if spec.mode is ReservationMode.WORKLOAD:
        return await serves_workload_topology(client, spec)
    return None

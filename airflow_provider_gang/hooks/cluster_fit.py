"""What the cluster offers the gang, read before anything is created: its Kueue queues and its zones.

Two questions the precheck (:mod:`hooks.precheck`) asks after discovery and RBAC, so that a gang the
cluster cannot serve fails in seconds instead of after the whole ``reservation_timeout``:

- **kueue mode: can the gang's LocalQueue admit it?** Kueue admits a Workload only through an active
  LocalQueue whose ClusterQueue is active and covers every resource the pods request (a resource no
  ``resourceGroups[].coveredResources`` lists makes the Workload inadmissible: "resource ... unavailable in
  ClusterQueue", Kueue ``pkg/scheduler/flavorassigner``). Read from the ``Active`` condition of
  ``LocalQueueStatus`` (reasons ``ClusterQueueDoesNotExist``, ``ClusterQueueIsInactive``, ...) and of
  ``ClusterQueueStatus`` (``FlavorNotFound``, ``AdmissionCheckNotFound``, ``Stopped``, ...), and from
  ``ClusterQueueSpec.resourceGroups`` (Kueue ``apis/kueue/v1beta2/localqueue_types.go``,
  ``clusterqueue_types.go``). A missing condition (the controller has
  not reported yet) refuses nothing. Each answer is a refusal message or ``None``.
- **a zone: does any node carry it yet?** Only a warning: a node pool that scales from zero has no node
  until the autoscaler creates one, so no node in the zone is not proof the zone cannot be served. Asked
  only when the identity may ``list nodes`` (an optional, cluster-wide permission the precheck never
  requires); nodes are matched on the well-known label ``topology.kubernetes.io/zone``
  (https://kubernetes.io/docs/reference/labels-annotations-taints/#topologykubernetesiozone).

The verdicts are pure functions of the objects read (:func:`local_queue_refusal`,
:func:`cluster_queue_refusal`, :func:`zone_warning`); :func:`read_queue` and :func:`zone_warnings`
do the reads. Errors other than a 404 are not caught by the queue checks: the client has retried
them, and the try ends with a retryable API error as for any other precheck call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_provider_gang.kube import discovery, errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, NODES
from airflow_provider_gang.reservation import conditions, quantity
from airflow_provider_gang.reservation.manifests import pods
from airflow_provider_gang.reservation.spec import GangSpec

ACTIVE = "Active"
"""The condition type of ``LocalQueueStatus`` and ``ClusterQueueStatus`` saying whether they admit."""
CLUSTER_QUEUE_DOES_NOT_EXIST = "ClusterQueueDoesNotExist"


def requested_resources(spec: GangSpec) -> list[str]:
    """Every resource a member pod requests (containers and init containers of ``pods.member_template``),
    in first-seen order. As Kueue reads a pod set (``pkg/workload/resources.go``): a limit without a
    request is the request (``UseLimitsAsMissingRequestsInPod``), and a zero request needs no quota."""
    pod_spec = pods.member_template(spec)["spec"]
    names: dict[str, None] = {}
    for container in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        resources = container.get("resources") or {}
        requests = dict(resources.get("requests") or {})
        for name, limit in (resources.get("limits") or {}).items():
            requests.setdefault(name, limit)
        names.update(dict.fromkeys(str(name) for name, amount in requests.items() if not _is_zero(amount)))
    return list(names)


def _is_zero(amount: object) -> bool:
    try:
        return isinstance(amount, (str, int)) and quantity.parse_quantity(amount) == 0
    except quantity.QuantityError:
        return False  # the API server refuses it when the gang's objects are created


def missing_local_queue(queue: str, namespace: str, existing: Iterable[str]) -> str:
    """The refusal for a LocalQueue that does not exist, naming those that do."""
    names = sorted(existing)
    if names:
        return (
            f"LocalQueue {queue!r} does not exist in namespace {namespace!r} (LocalQueues there: "
            f"{', '.join(names)}); create it or set kueue_queue to one of them"
        )
    return (
        f"LocalQueue {queue!r} does not exist in namespace {namespace!r} (there is no LocalQueue there); "
        "create it (spec.clusterQueue: the ClusterQueue to admit from) or run the gang in a namespace with one"
    )


def _inactive(obj: Mapping[str, Any]) -> str | None:
    """``"reason: message"`` of an ``Active=False`` condition, or ``None`` (true, or not reported yet)."""
    condition = conditions.find_condition(obj, ACTIVE)
    if condition is None or condition.get("status") != "False":
        return None
    return conditions.condition_message(obj, ACTIVE) or "no reason given"


def target_of(local_queue: Mapping[str, Any]) -> str | None:
    """``spec.clusterQueue`` of a LocalQueue (required and immutable in the CRD), or ``None``."""
    target = (local_queue.get("spec") or {}).get("clusterQueue")
    return target if isinstance(target, str) and target else None


def local_queue_refusal(local_queue: Mapping[str, Any], namespace: str) -> str | None:
    """Why the LocalQueue cannot take the gang's Workload: no ClusterQueue named, or ``Active=False``."""
    name = str((local_queue.get("metadata") or {}).get("name", ""))
    target = target_of(local_queue)
    if target is None:
        return f"LocalQueue {namespace}/{name} names no ClusterQueue (spec.clusterQueue); recreate it with one"
    inactive = _inactive(local_queue)
    if inactive is None:
        return None
    fix = (
        f"create ClusterQueue {target!r}"
        if inactive.startswith(CLUSTER_QUEUE_DOES_NOT_EXIST)
        else f"see `kubectl describe clusterqueue {target}`"
    )
    return (
        f"LocalQueue {namespace}/{name} cannot admit workloads from ClusterQueue {target!r}: LocalQueue "
        f"Active=False, {inactive}; {fix} or set kueue_queue to another LocalQueue"
    )


def cluster_queue_refusal(
    cluster_queue: Mapping[str, Any] | None, local_queue: str, target: str, requested: Sequence[str]
) -> str | None:
    """Why the ClusterQueue ``target`` (``None``: it does not exist) of the LocalQueue ``local_queue``
    (``namespace/name``) cannot admit the gang: gone, ``Active=False``, or a requested resource that no
    resource group covers (then no flavor has it)."""
    if cluster_queue is None:
        return (
            f"LocalQueue {local_queue} cannot admit workloads from ClusterQueue {target!r}: it does not exist "
            f"({CLUSTER_QUEUE_DOES_NOT_EXIST}); create ClusterQueue {target!r} or set kueue_queue to another "
            "LocalQueue"
        )
    inactive = _inactive(cluster_queue)
    if inactive is not None:
        return (
            f"LocalQueue {local_queue} cannot admit workloads from ClusterQueue {target!r}: ClusterQueue "
            f"Active=False, {inactive}; see `kubectl describe clusterqueue {target}` or set kueue_queue "
            "to another LocalQueue"
        )
    covered: dict[str, None] = {}
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        if isinstance(group, Mapping):
            covered.update(dict.fromkeys(str(name) for name in group.get("coveredResources") or []))
    missing = [name for name in requested if name not in covered]
    if not missing:
        return None
    cover = f"cover only {', '.join(covered)}" if covered else "cover nothing"
    return (
        f"ClusterQueue {target!r} (of LocalQueue {local_queue}) has no flavor with {', '.join(missing)}: its "
        f"resourceGroups {cover}; add {', '.join(missing)} to a resource group (coveredResources, and a "
        "nominalQuota in each of its flavors) or set kueue_queue to a LocalQueue whose ClusterQueue covers it"
    )


async def read_queue(client: KubeClient, spec: GangSpec) -> tuple[str | None, dict[str, Any] | None]:
    """GET the gang's LocalQueue (LIST them when it is missing) and its ClusterQueue: the first refusal
    (``None``: the queue can admit the gang) and the ClusterQueue as read (``None``: not read)."""
    if spec.queue is None:
        return None, None
    try:
        local_queue = await client.get(LOCAL_QUEUES, spec.queue, spec.namespace)
    except errors.NotFound:
        existing, _ = await client.list(LOCAL_QUEUES, spec.namespace)
        names = [str((item.get("metadata") or {}).get("name", "")) for item in existing]
        return missing_local_queue(spec.queue, spec.namespace, names), None
    refusal = local_queue_refusal(local_queue, spec.namespace)
    target = target_of(local_queue)
    if refusal is not None or target is None:
        return refusal, None
    try:
        cluster_queue: dict[str, Any] | None = await client.get(CLUSTER_QUEUES, target)
    except errors.NotFound:
        cluster_queue = None
    local = f"{spec.namespace}/{spec.queue}"
    return cluster_queue_refusal(cluster_queue, local, target, requested_resources(spec)), cluster_queue


def _zone_of(node: Mapping[str, Any]) -> str | None:
    labels = (node.get("metadata") or {}).get("labels") or {}
    zone = labels.get(pods.ZONE_LABEL) if isinstance(labels, Mapping) else None
    return zone if isinstance(zone, str) else None


def zone_warning(zone: str, nodes: Iterable[Mapping[str, Any]]) -> str | None:
    """The warning when no node in ``nodes`` carries ``topology.kubernetes.io/zone=<zone>``."""
    zones = sorted({found for found in map(_zone_of, nodes) if found is not None})
    if zone in zones:
        return None
    where = f"nodes are in: {', '.join(zones)}" if zones else f"no node carries {pods.ZONE_LABEL}"
    return f"no node in zone {zone} yet ({where}); a node pool that scales from zero may still create one"


async def zone_warnings(client: KubeClient, spec: GangSpec) -> list[str]:
    """``[warning]`` when the identity may ``list nodes`` and none is in ``spec.zone``; else ``[]``.

    One LIST of at most one node in the zone answers the usual case; only when it is empty are all nodes
    listed, to name the zones there are. A failed read is reported as a warning: this check is optional.
    """
    if spec.zone is None:
        return []
    try:
        if not (await discovery.can_i(client, "list", NODES)).allowed:
            return []
        selector = f"{pods.ZONE_LABEL}={spec.zone}"
        page = await client.request_json("GET", NODES.path(), params={"labelSelector": selector, "limit": "1"})
        if isinstance(page, dict) and page.get("items"):
            return []
        nodes, _ = await client.list(NODES)
    except errors.KubeError as error:
        return [f"could not check that a node is in zone {spec.zone} (list nodes): {error}"]
    warning = zone_warning(spec.zone, nodes)
    return [] if warning is None else [warning]

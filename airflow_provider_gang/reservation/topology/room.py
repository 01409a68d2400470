"""What the nodes hold: the room for a gang's members on each node a member may run on.

A snapshot of the cluster as a scheduler sees it, read from a LIST of nodes and a LIST of pods of every
namespace (the hooks read them, ``hooks.topology_reads``):

- **which nodes** a member may run on (:func:`is_eligible`): schedulable (``spec.unschedulable``
  unset), ``Ready=True``, matching the member's ``nodeSelector`` and required node affinity (terms
  ORed, expressions ANDed; ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``, and
  ``matchFields`` on ``metadata.name``), and tolerating every ``NoSchedule``/``NoExecute`` taint - the
  kube-scheduler's ``NodeUnschedulable``, ``NodeAffinity`` and ``TaintToleration`` filters
  (https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/,
  https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/);
- **what is free** on it (:func:`rooms`): ``status.allocatable`` minus the requests of the pods bound
  there that have not terminated (``spec.nodeName`` set, phase neither ``Succeeded`` nor ``Failed``),
  each pod also taking one of the node's ``pods``;
- **what a member needs** (:func:`member_requests`): the effective request of its pod, as the
  scheduler's ``NodeResourcesFit`` computes it (``k8s.io/component-helpers`` ``resource.PodRequests``):
  per resource the larger of the containers' sum and the largest init container, plus ``spec.overhead``;
  a limit without a request counts as the request (the API server defaults it so), and one ``pods``.

What a scheduler does and this does not: inter-pod (anti-)affinity, topology spread constraints, host
ports, volumes' node affinity, extended resources' dynamic allocation. A snapshot is a moment: other
schedulers keep binding (see ``docs/topology.md`` on that race).

An object of the wrong shape raises :class:`~reservation.errors.MalformedObject` naming it and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow_provider_gang.reservation import quantity, shape
from airflow_provider_gang.reservation.errors import MalformedObject

Resources = Mapping[str, Decimal]
PODS = "pods"
"""The resource every pod takes one of (a node's ``allocatable.pods``, 110 by default)."""
_ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class NodeRoom:
    """A node a member may run on: its name, labels and what is free on it."""

    name: str
    labels: Mapping[str, str]
    free: Resources

    def members_fit(self, member: Resources) -> int:
        """How many members needing ``member`` fit in what is free here (0 if a resource is missing)."""
        counts = [int(self.free.get(name, Decimal(0)) // amount) for name, amount in member.items() if amount > 0]
        return max(0, min(counts)) if counts else 0


def _parse(amount: Any, where: str) -> Decimal:
    try:
        return quantity.parse_quantity(amount)
    except quantity.QuantityError as error:
        raise MalformedObject(f"{where}: {error}") from None


def _add(total: dict[str, Decimal], more: Mapping[str, Any], where: str) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, Decimal(0)) + _parse(amount, f"{where}[{name!r}]")


def _container_requests(container: Mapping[str, Any], where: str) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    requests: dict[str, Any] = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    found: dict[str, Decimal] = {}
    _add(found, requests, f"{where}.resources")
    return found


def pod_requests(pod_spec: Mapping[str, Any], where: str = "pod") -> dict[str, Decimal]:
    """The effective request of a pod (module docstring), ``pods: 1`` included."""
    total: dict[str, Decimal] = {PODS: Decimal(1)}
    for index, container in enumerate(pod_spec.get("containers") or []):
        for name, amount in _container_requests(container, f"{where}.spec.containers[{index}]").items():
            total[name] = total.get(name, Decimal(0)) + amount
    for index, container in enumerate(pod_spec.get("initContainers") or []):
        for name, amount in _container_requests(container, f"{where}.spec.initContainers[{index}]").items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    _add(total, pod_spec.get("overhead") or {}, f"{where}.spec.overhead")
    return total


def member_requests(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one member needs: :func:`pod_requests` of the member pod's spec."""
    return pod_requests(pod_spec, "the member pod")


def node_labels(node: Mapping[str, Any]) -> dict[str, str]:
    """A node's labels; a value that is no string is malformed (the API server only stores strings)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in labels.items():
        if not isinstance(value, str):
            name = (node.get("metadata") or {}).get("name")
            raise MalformedObject(f"Node {name}: metadata.labels[{key!r}] is {type(value).__name__}, not a string")
    return dict(labels)


def _matches(expression: Mapping[str, Any], value: str | None) -> bool:
    operator, values = expression.get("operator"), [str(item) for item in expression.get("values") or []]
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and value.lstrip("-").isdigit() and values:
        number, bound = int(value), int(values[0])
        return number > bound if operator == "Gt" else number < bound
    return False


def _term_matches(term: Mapping[str, Any], name: str, labels: Mapping[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node (v1.NodeSelectorTerm)
    return all(_matches(item, labels.get(str(item.get("key")))) for item in expressions) and all(
        _matches(item, name if item.get("key") == "metadata.name" else None) for item in fields
    )


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        key, operator = toleration.get("key"), toleration.get("operator") or "Equal"
        if operator == "Exists" and key in (None, "", taint.get("key")):
            return True
        if (
            operator == "Equal"
            and key == taint.get("key")
            and (toleration.get("value") or "") == (taint.get("value") or "")
        ):
            return True
    return False


def _is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(item.get("type") == "Ready" and item.get("status") == "True" for item in conditions)


def is_eligible(node: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> bool:
    """Whether a member with ``pod_spec`` may be bound to ``node`` (module docstring)."""
    name, labels = str((node.get("metadata") or {}).get("name", "")), node_labels(node)
    if (node.get("spec") or {}).get("unschedulable") or not _is_ready(node):
        return False
    if any(labels.get(key) != value for key, value in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required and not any(_term_matches(term, name, labels) for term in required.get("nodeSelectorTerms") or []):
        return False
    tolerations = pod_spec.get("tolerations") or []
    return all(
        _tolerates(tolerations, taint)
        for taint in (node.get("spec") or {}).get("taints") or []
        if taint.get("effect") in ("NoSchedule", "NoExecute")
    )


def _checked(kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    problem = shape.malformed(kind, obj)
    if problem is not None:
        raise MalformedObject(problem)
    return obj


def usage_by_node(
    pods: Iterable[Mapping[str, Any]], *, leave_out: frozenset[str] = frozenset()
) -> dict[str, dict[str, Decimal]]:
    """The requests of the pods bound to each node and not terminated; pods named ``namespace/name``
    in ``leave_out`` (the gang's own members) are not counted."""
    usage: dict[str, dict[str, Decimal]] = {}
    for pod in pods:
        _checked("Pod", pod)
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in _ENDED:
            continue
        if f"{metadata.get('namespace')}/{metadata.get('name')}" in leave_out:
            continue
        where = f"Pod {metadata.get('namespace')}/{metadata.get('name')}"
        for name, amount in pod_requests(spec, where).items():
            usage.setdefault(str(node), {})[name] = usage.get(str(node), {}).get(name, Decimal(0)) + amount
    return usage


def rooms(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    pod_spec: Mapping[str, Any],
    *,
    leave_out: frozenset[str] = frozenset(),
) -> tuple[NodeRoom, ...]:
    """Every node a member with ``pod_spec`` may run on, with what is free on it, in name order."""
    usage = usage_by_node(pods, leave_out=leave_out)
    found = []
    for node in nodes:
        _checked("Node", node)
        if not is_eligible(node, pod_spec):
            continue
        name = str(node["metadata"]["name"])
        free: dict[str, Decimal] = {}
        _add(free, (node.get("status") or {}).get("allocatable") or {}, f"Node {name}: status.allocatable")
        for resource, amount in usage.get(name, {}).items():
            free[resource] = free.get(resource, Decimal(0)) - amount
        found.append(NodeRoom(name, node_labels(node), free))
    return tuple(sorted(found, key=lambda room: room.name))

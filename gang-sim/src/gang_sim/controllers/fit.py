"""Pure fit checks: can a pod run on a node? (kube-scheduler filter plugins, simplified)

The filters run in kube-scheduler's default order and a node reports the reasons of the first filter
that rejects it (``pkg/scheduler/framework/plugins``):

1. ``TaintToleration``: every ``NoSchedule``/``NoExecute`` taint must be tolerated
   ("node(s) had untolerated taint {key: value}").
2. ``NodeAffinity``: ``spec.nodeSelector`` and required node affinity
   ("node(s) didn't match Pod's node affinity/selector").
   GKE specific reservations are no filter of their own: a node of a pool consuming reservation
   ``<name>`` (labelled ``cloud.google.com/reservation-name: <name>``,
   :data:`~gang_sim.world.cloud.RESERVATION_LABEL`) takes any pod that fits, as every node does -
   the kube-scheduler knows no reservations, and GKE's node pools leave "the scheduler free to
   place a Pod on any node that satisfies the Pod's CPU, memory, and custom resource requirements"
   unless they are tainted (https://cloud.google.com/kubernetes-engine/docs/how-to/node-taints); a
   pod that selects the reservation lands only on its nodes through this filter. The real
   kube-scheduler and cluster-autoscaler do the same (``tests/real/test_fallbacks.py``).
3. ``NodeResourcesFit``: requested cpu, memory, ``nvidia.com/gpu``, pods against allocatable minus
   what bound pods request ("Insufficient nvidia.com/gpu", one reason per short resource).

:func:`unschedulable_message` renders the reasons the way ``FitError.Error()`` does:
``0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint
{nvidia.com/gpu: present}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for
scheduling.`` (reasons counted over nodes and sorted by text).

Not modelled: pod (anti-)affinity, topology spread, ports, volumes, preferred terms, priorities.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from gang_sim.world.resources import Resources, parse_resources, subtract

AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """``v1.Toleration.ToleratesTaint``: an empty key with Exists matches every taint."""
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if key and key != taint.get("key"):
            continue
        if operator == "Exists":
            return True
        if operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taint(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    tolerations = pod_spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return dict(taint)
    return None


def _matches_expression(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = expression.get("key", "")
    operator = expression.get("operator")
    values = [str(value) for value in expression.get("values") or []]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            actual, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


def _matches_term(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no objects (v1.NodeSelectorTerm)
    labels = (node.get("metadata") or {}).get("labels") or {}
    node_fields = {"metadata.name": (node.get("metadata") or {}).get("name", "")}
    return all(_matches_expression(expression, labels) for expression in expressions) and all(
        _matches_expression(expression, node_fields) for expression in fields
    )


def matches_node_affinity(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """``nodeSelector`` (all pairs) and required node affinity (terms ORed, expressions ANDed)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms is None:
        return True
    return any(_matches_term(term, node) for term in terms)


def allocatable(node: Mapping[str, Any]) -> Resources:
    status = node.get("status") or {}
    return parse_resources(status.get("allocatable") or status.get("capacity"))


def insufficient_resources(requests: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> list[str]:
    """``Insufficient <resource>`` for every requested resource that does not fit (sorted by name)."""
    return [
        f"Insufficient {name}"
        for name, amount in sorted(requests.items())
        if amount > 0 and amount > free.get(name, Fraction(0))
    ]


def fit_failures(
    pod_spec: Mapping[str, Any],
    requests: Mapping[str, Fraction],
    node: Mapping[str, Any],
    used: Mapping[str, Fraction],
    capacity: Mapping[str, Fraction] | None = None,
) -> list[str]:
    """Why ``node`` cannot take the pod (empty list = it fits); ``used`` = requests of its bound pods;
    ``capacity`` = ``allocatable(node)`` when the caller has it already."""
    if (node.get("spec") or {}).get("unschedulable"):
        return ["node(s) were unschedulable"]
    taint = untolerated_taint(pod_spec, node)
    if taint is not None:
        value = taint.get("value") or ""
        return [f"node(s) had untolerated taint {{{taint.get('key')}: {value}}}"]
    if not matches_node_affinity(pod_spec, node):
        return [AFFINITY_MISMATCH]
    return insufficient_resources(requests, subtract(allocatable(node) if capacity is None else capacity, used))


def unschedulable_message(total_nodes: int, failures: Mapping[str, list[str]]) -> str:
    """The ``PodScheduled=False/Unschedulable`` message for a pod no node accepts."""
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    histogram: Counter[str] = Counter()
    for reasons in failures.values():
        histogram.update(reasons)
    reasons_text = ", ".join(f"{count} {reason}" for reason, count in sorted(histogram.items()))
    return (
        f"0/{total_nodes} nodes are available: {reasons_text}. preemption: 0/{total_nodes} nodes are available: "
        f"{total_nodes} Preemption is not helpful for scheduling."
    )


def least_allocated_score(
    requests: Mapping[str, Fraction],
    node: Mapping[str, Any],
    used: Mapping[str, Fraction],
    capacity: Mapping[str, Fraction] | None = None,
) -> float:
    """``NodeResourcesFit`` LeastAllocated score (0..100) over cpu and memory after placing the pod
    (``capacity`` as :func:`fit_failures` takes it)."""
    capacity = allocatable(node) if capacity is None else capacity
    scores = []
    for name in ("cpu", "memory"):
        total = capacity.get(name, Fraction(0))
        if total <= 0:
            continue
        after = used.get(name, Fraction(0)) + requests.get(name, Fraction(0))
        scores.append(float((total - after) / total) * 100)
    return sum(scores) / len(scores) if scores else 0.0

"""Where Kueue's Topology Aware Scheduling puts each rank of an admitted Job, read from its Workload.

On admission Kueue writes the domains of the lowest level and the pods per domain in
``status.admission.podSetAssignments[].topologyAssignment`` - in ``kueue.x-k8s.io/v1beta2`` the compact
form: ``levels`` (the Topology's node labels) and ``slices``, each ``domainCount`` domains with, per
level, one ``universal`` value or ``individual`` values (``prefix`` + ``roots[i]`` + ``suffix``), and
``podCounts`` (``universal`` or ``individual``), sigs.k8s.io/kueue ``apis/kueue/v1beta2/workload_types.go``
``TopologyAssignment``. Its TopologyUngater then gives completion index ``r`` the domain that holds
the ``r``-th pod when the domains are filled in that order (``rankToDomainID``,
``pkg/controller/tas/topology_ungater.go``), which :func:`rank_domains` repeats.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def _value(level: Mapping[str, Any], index: int) -> str:
    if "universal" in level:
        return str(level["universal"])
    individual = level.get("individual") or {}
    return f"{individual.get('prefix', '')}{individual['roots'][index]}{individual.get('suffix', '')}"


def domains(assignment: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], int]]:
    """``(level values, pod count)`` of every domain of a v1beta2 ``topologyAssignment``, in order."""
    for item in assignment.get("slices") or []:
        counts = item.get("podCounts") or {}
        per_level = item.get("valuesPerLevel") or []
        for index in range(int(item.get("domainCount", 0))):
            count = counts["universal"] if "universal" in counts else counts["individual"][index]
            yield tuple(_value(level, index) for level in per_level), int(count)


def rank_domains(workload: Mapping[str, Any], label: str) -> dict[int, str]:
    """``rank -> value of label`` for the first topology-assigned PodSet of ``workload``; ``{}`` when it
    is not admitted by topology or ``label`` is not among the assignment's levels. An assignment of
    an unknown shape raises ``KeyError``/``IndexError``/``TypeError``/``ValueError`` for the caller."""
    admission = (workload.get("status") or {}).get("admission") or {}
    for pod_set in admission.get("podSetAssignments") or []:
        assignment = pod_set.get("topologyAssignment")
        if not assignment:
            continue
        levels = list(assignment.get("levels") or [])
        if label not in levels:
            return {}
        at = levels.index(label)
        slots = [values[at] for values, count in domains(assignment) for _ in range(count)]
        return dict(enumerate(slots))
    return {}

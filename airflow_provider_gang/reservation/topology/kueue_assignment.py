"""Where Kueue's Topology Aware Scheduling puts each rank of an admitted Job, read from its Workload.

On admission Kueue writes the domains of the lowest level and the pods per domain in
``status.admission.podSetAssignments[].topologyAssignment`` - in ``kueue.x-k8s.io/v1beta2`` the compact
form: ``levels`` (the Topology's node labels) and ``slices``, each ``domainCount`` domains with, per
level, one ``universal`` value or ``individual`` values (``prefix`` + ``roots[i]`` + ``suffix``), and
``podCounts`` (``universal`` or ``individual``), sigs.k8s.io/kueue ``apis/kueue/v1beta2/workload_types.go``
``TopologyAssignment``. Its TopologyUngater then gives completion index ``r`` the domain that holds
the ``r``-th pod when the domains are filled in that order (``rankToDomainID``,
``pkg/controller/tas/topology_ungater.go``), which :func:`rank_levels` repeats.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from airflow_provider_gang.reservation.topology.labels import HOSTNAME


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


def rank_levels(workload: Mapping[str, Any]) -> dict[int, dict[str, str]]:
    """``rank -> {level: value}`` for the first topology-assigned PodSet of ``workload`` (``{}``: not
    admitted by topology). Kueue keeps only the ``kubernetes.io/hostname`` level in the assignment when
    it is the Topology's lowest (``pkg/util/tas/tas_assignment.go``), so a wider level may be missing:
    :func:`rank_domains` then reads it from the nodes. An assignment of an unknown shape raises
    ``KeyError``/``IndexError``/``TypeError``/``ValueError`` for the caller."""
    admission = (workload.get("status") or {}).get("admission") or {}
    for pod_set in admission.get("podSetAssignments") or []:
        assignment = pod_set.get("topologyAssignment")
        if not assignment:
            continue
        levels = [str(level) for level in assignment.get("levels") or []]
        slots = [dict(zip(levels, values, strict=True)) for values, count in domains(assignment) for _ in range(count)]
        return dict(enumerate(slots))
    return {}


def rank_domains(workload: Mapping[str, Any], label: str, nodes: Iterable[Mapping[str, Any]] = ()) -> dict[int, str]:
    """``rank -> value of label`` as Kueue assigned the ranks: from the assignment when it has the
    level, else through the host it gives each rank, from ``nodes`` (their ``kubernetes.io/hostname``)."""
    by_rank = rank_levels(workload)
    if all(label in levels for levels in by_rank.values()):
        return {rank: levels[label] for rank, levels in by_rank.items()}
    host_domain = {}
    for node in nodes:
        node_labels = (node.get("metadata") or {}).get("labels") or {}
        if HOSTNAME in node_labels and label in node_labels:
            host_domain[str(node_labels[HOSTNAME])] = str(node_labels[label])
    found = {rank: host_domain.get(levels.get(HOSTNAME, "")) for rank, levels in by_rank.items()}
    return {rank: value for rank, value in found.items() if value is not None}

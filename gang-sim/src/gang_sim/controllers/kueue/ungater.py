"""Kueue's TopologyUngater: each pod of a TAS admission to its domain, then its gate off. Pure.

As kubernetes-sigs/kueue v0.17.0 ``pkg/controller/tas/topology_ungater.go``, for a Workload that is
admitted with a ``topologyAssignment`` (``IsAdmittedByTAS``), per podSet assignment:

- its pods are those labelled ``kueue.x-k8s.io/podset: <podSet>`` and annotated
  ``kueue.x-k8s.io/workload: <Workload>`` (Kueue's start puts both there), not terminated;
- **by rank** when the podSet's ``topologyRequest.podIndexLabel`` (a Job's
  ``batch.kubernetes.io/job-completion-index``) is on every pod, each below the podSet's count and
  no two alike, and every pod already ungated sits in the domain its rank gives: rank ``r`` goes to
  the domain that holds the ``r``-th pod when the assignment's domains are filled in order, so
  consecutive completion indices share the lowest domains (``rankToDomainID``);
- **greedily** otherwise: the gated pods, in name order, fill each domain's count minus the pods
  already ungated into it (their ``nodeSelector``), domain by domain (``assignGatedPodsToDomainsGreedy``;
  upstream takes the pods in its cache's list order);
- a pod is ungated by one patch: the ``kueue.x-k8s.io/topology`` gate removed and the domain's level
  labels added to its ``nodeSelector`` (``kubernetes.io/hostname: <node>`` when the lowest level is the
  hostname), which the scheduler then honours.

Not modelled: ``kueue.x-k8s.io/pod-index-offset``, sub-groups (``subGroupIndexLabel``), leader/worker
rank offsets, the expectations store (the emulator's pass sees its own writes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gang_sim.controllers.base import is_true
from gang_sim.controllers.kueue import tas
from gang_sim.controllers.kueue.patches import PatchObject
from gang_sim.controllers.kueue.tas_placement import domain_id

Obj = dict[str, Any]
Domain = tuple[tuple[str, ...], int]


def is_admitted_by_tas(workload: Mapping[str, Any]) -> bool:
    assignments = ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    return is_true(dict(workload), "Admitted") and any(item.get("topologyAssignment") for item in assignments)


def _has_gate(pod: Mapping[str, Any]) -> bool:
    return any(gate.get("name") == tas.TOPOLOGY_GATE for gate in (pod.get("spec") or {}).get("schedulingGates") or [])


def _pods_of(workload: Mapping[str, Any], pod_set: str, pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    metadata = workload["metadata"]
    return sorted(
        (
            pod
            for pod in pods
            if pod["metadata"].get("namespace") == metadata["namespace"]
            and (pod["metadata"].get("labels") or {}).get(tas.PODSET_LABEL) == pod_set
            and (pod["metadata"].get("annotations") or {}).get(tas.WORKLOAD_ANNOTATION) == metadata["name"]
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ),
        key=lambda pod: pod["metadata"]["name"],
    )


def _rank_domains(domains: Sequence[Domain]) -> list[tuple[str, ...]]:
    """Rank -> domain values, filling the domains in order."""
    return [values for values, count in domains for _ in range(count)]


def _domain_of(pod: Mapping[str, Any], levels: Sequence[str]) -> tuple[str, ...]:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return tuple(str(selector.get(level, "")) for level in levels)


def _ranks(
    pods: Sequence[Mapping[str, Any]], label: str | None, ranks: Sequence[tuple[str, ...]], levels: Sequence[str]
) -> dict[int, Mapping[str, Any]] | None:
    """Rank -> pod from ``label``, or ``None`` when ranks cannot be used (``readRanksIfAvailable``)."""
    if label is None:
        return None
    by_rank: dict[int, Mapping[str, Any]] = {}
    for pod in pods:
        value = (pod["metadata"].get("labels") or {}).get(label, "")
        if not value.isdigit() or int(value) >= len(ranks) or int(value) in by_rank:
            return None
        by_rank[int(value)] = pod
    for rank, pod in by_rank.items():
        if not _has_gate(pod) and _domain_of(pod, levels) != ranks[rank]:
            return None
    return by_rank


def _greedy(
    pods: Sequence[Mapping[str, Any]], domains: Sequence[Domain], levels: Sequence[str]
) -> list[tuple[Mapping[str, Any], tuple[str, ...]]]:
    gated = [pod for pod in pods if _has_gate(pod)]
    ungated: dict[str, int] = {}
    for pod in pods:
        if not _has_gate(pod):
            key = domain_id(_domain_of(pod, levels))
            ungated[key] = ungated.get(key, 0) + 1
    chosen: list[tuple[Mapping[str, Any], tuple[str, ...]]] = []
    for values, count in domains:
        missing = max(count - ungated.get(domain_id(values), 0), 0)
        take = min(missing, len(gated) - len(chosen))
        chosen += [(pod, values) for pod in gated[len(chosen) : len(chosen) + take]]
    return chosen


def _patch(pod: Mapping[str, Any], levels: Sequence[str], values: Sequence[str]) -> PatchObject:
    spec = pod.get("spec") or {}
    gates = [gate for gate in spec.get("schedulingGates") or [] if gate.get("name") != tas.TOPOLOGY_GATE]
    selector = {**(spec.get("nodeSelector") or {}), **dict(zip(levels, values, strict=True))}
    metadata = pod["metadata"]
    body = {"spec": {"schedulingGates": gates, "nodeSelector": selector}}
    return PatchObject("v1/pods", metadata["name"], body, namespace=metadata["namespace"])


def ungate(workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[PatchObject]:
    """The pod patches that place and ungate ``workload``'s gated pods (module docstring)."""
    if not is_admitted_by_tas(workload):
        return []
    pods = list(pods)
    pod_sets = {item["name"]: item for item in (workload.get("spec") or {}).get("podSets") or []}
    patches: list[PatchObject] = []
    for assignment in workload["status"]["admission"]["podSetAssignments"]:
        topology = assignment.get("topologyAssignment")
        if not topology:
            continue
        levels = list(topology.get("levels") or [])
        domains = tas.domains_of(topology)
        members = _pods_of(workload, assignment["name"], pods)
        ranks = _rank_domains(domains)
        label = ((pod_sets.get(assignment["name"]) or {}).get("topologyRequest") or {}).get("podIndexLabel")
        by_rank = _ranks(members, label, ranks, levels)
        if by_rank is not None:
            placed = [(pod, ranks[rank]) for rank, pod in sorted(by_rank.items())]
        else:
            placed = _greedy(members, domains, levels)
        patches += [_patch(pod, levels, values) for pod, values in placed if _has_gate(pod)]
    return patches

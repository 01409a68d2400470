"""The PodGroup of a ``workload`` gang and its members (Kubernetes' own gang scheduling, KEP-4671).

In Kubernetes v1.37 a standalone ``PodGroup`` (``scheduling.k8s.io/v1beta1``, k8s.io/api
``scheduling/v1beta1/types.go``; v1alpha3 has the same PodGroup) carries the scheduling policy; a pod
joins it with ``spec.schedulingGroup.podGroupName`` (``core/v1/types.go`` ``PodSchedulingGroup``,
immutable, set at creation). ``spec.workloadRef`` - the Workload whose ``podGroupTemplates`` a
controller copied the policy from - is optional, so no Workload is created: the provider is the
PodGroup's only controller. The gang policy ``minCount`` makes the kube-scheduler place at least that
many of the group's pods at once or none (``pkg/scheduler/framework/plugins/gangscheduling``); it is
the gang's ``size`` - a ``workload`` gang is never partially placed, ``min_size`` is only the floor of
the fallback ladder's shrink step, whose next try is a new PodGroup with the smaller ``minCount``.

The PodGroup is owned by the gang's owner ConfigMap like every other object of the gang, so deleting
the owner garbage-collects it with the members.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common, pods
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

GROUP = "scheduling.k8s.io"
VERSIONS = ("v1beta1", "v1alpha3")
"""The served versions whose PodGroup this module writes, preferred first (Kubernetes v1.37)."""


def pod_group(spec: GangSpec, *, owner_uid: str, api_version: str = f"{GROUP}/{VERSIONS[0]}") -> dict[str, Any]:
    """The gang's PodGroup: named like the gang, gang policy ``minCount: size``, and the topology
    constraint of a ``required_topology``."""
    _require_mode(spec)
    names = naming.GangNames(spec.name)
    body: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": spec.size}}}
    if spec.required_topology is not None:
        body["schedulingConstraints"] = topology_constraint(spec.required_topology)
    return {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": common.metadata(spec, names.pod_group, common.ROLE_RESERVATION, owner_uid),
        "spec": body,
    }


def topology_constraint(label: str) -> dict[str, Any]:
    """``spec.schedulingConstraints`` placing the whole group in one domain of ``label`` (KEP-5732,
    k8s.io/api ``scheduling/v1beta1/types.go`` ``PodGroupSchedulingConstraints``: at most one
    ``topology`` item, its ``key`` a node label); served only with the feature gate
    ``TopologyAwareWorkloadScheduling`` (alpha since v1.36) - without it the API server drops the
    field (``hooks.workload_api_check``)."""
    return {"topology": [{"key": label}]}


def member_pod(spec: GangSpec, rank: int, *, owner_uid: str, master_address: str | None = None) -> dict[str, Any]:
    """Member ``rank`` linked to the gang's PodGroup (``spec.schedulingGroup.podGroupName``): the
    scheduler holds it until ``minCount`` members exist, then binds the group together."""
    _require_mode(spec)
    pod = pods.member_pod(spec, rank, owner_uid=owner_uid, master_address=master_address)
    pod["spec"]["schedulingGroup"] = {"podGroupName": naming.GangNames(spec.name).pod_group}
    return pod


def _require_mode(spec: GangSpec) -> None:
    if spec.mode is not ReservationMode.WORKLOAD:
        raise ValueError(f"a PodGroup belongs to reservation='workload', not {spec.mode.value!r}")

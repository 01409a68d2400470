"""Feature gates of the emulated kube-apiserver that change what a kind serves.

A gate is on for the kinds it guards when the server's registry says so
(:attr:`.registry.ResourceType.feature_gates`, set by :func:`enable`); the kinds' admission
(:mod:`.kinds`) drops the fields a gate guards while it is off, as the upstream registry strategies
do, and the simulated kube-scheduler reads the same flag (``gang_sim.controllers.gang_scheduling``).

- ``TopologyAwareWorkloadScheduling`` (KEP-5732, alpha since Kubernetes 1.36, off by default:
  ``k8s.io/kubernetes`` v1.37.2 ``pkg/features/kube_features.go``) guards
  ``PodGroup.spec.schedulingConstraints`` and ``Workload.spec.podGroupTemplates[].schedulingConstraints``
  (``scheduling.k8s.io/v1beta1``). While it is off the apiserver *drops* the field on create, and on
  an update unless the stored object already has it (``pkg/registry/scheduling/podgroup/strategy.go``
  ``dropDisabledSchedulingConstraintsFields``, ``pkg/registry/scheduling/workload/strategy.go``): the
  object is created without it, with no error and no warning.

Only the gates listed in :data:`GUARDED_KINDS` are modelled; the Workload API itself
(``GenericWorkload``) is served or not as a whole (``Emulator(serve_workload_api=...)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from gang_sim.apiserver.registry import Registry, ResourceType

TOPOLOGY_AWARE_WORKLOAD_SCHEDULING = "TopologyAwareWorkloadScheduling"
GUARDED_KINDS: Mapping[str, tuple[str, ...]] = {
    TOPOLOGY_AWARE_WORKLOAD_SCHEDULING: ("scheduling.k8s.io/podgroups", "scheduling.k8s.io/workloads"),
}
"""Gate -> the storage keys of the kinds whose fields it guards."""


class UnknownFeatureGate(ValueError):
    """A gate this emulator does not model."""

    def __init__(self, gate: str) -> None:
        super().__init__(f"unknown feature gate {gate!r}; the emulator models {', '.join(sorted(GUARDED_KINDS))}")
        self.gate = gate


def enable(registry: Registry, gates: Iterable[str]) -> None:
    """Turn ``gates`` on for every served version of the kinds they guard (kinds not served stay so)."""
    for gate in gates:
        if gate not in GUARDED_KINDS:
            raise UnknownFeatureGate(gate)
        for storage_key in GUARDED_KINDS[gate]:
            for served in registry.versions_of(storage_key):
                registry.add(dataclasses.replace(served, feature_gates=served.feature_gates | {gate}))


def is_enabled(resource_type: ResourceType | None, gate: str) -> bool:
    """Whether ``gate`` is on for ``resource_type`` (``None``, a kind not served: off)."""
    return resource_type is not None and gate in resource_type.feature_gates

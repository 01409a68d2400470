"""``scheduling.k8s.io/v1beta1`` PodGroup and Workload admission: the fields feature gates guard.

``spec.schedulingConstraints`` of a PodGroup (and of each ``spec.podGroupTemplates[]`` of a
Workload) exists only with the ``TopologyAwareWorkloadScheduling`` gate (:mod:`..feature_gates`).
Gate off: the field is dropped on create, and on update unless the stored object has it
(``k8s.io/kubernetes`` v1.37.2 ``pkg/registry/scheduling/podgroup/strategy.go``,
``pkg/registry/scheduling/workload/strategy.go``). Gate on: at most one topology constraint, each
with a ``key`` that is a label key (``k8s.io/api`` ``scheduling/v1beta1/types.go`` markers
``+k8s:maxItems=1``, ``+k8s:required``, ``+k8s:format=k8s-label-key``), immutable once set.

Not modelled: the rest of these kinds' validation (scheduling policy, resource claims, disruption
mode, priority), their defaulting (``disruptionMode: {single: {}}``, ``priority``).
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver import errors, validation
from gang_sim.apiserver.errors import Cause
from gang_sim.apiserver.feature_gates import TOPOLOGY_AWARE_WORKLOAD_SCHEDULING, is_enabled
from gang_sim.apiserver.kinds.base import Object, Strategy
from gang_sim.apiserver.registry import ResourceType

CONSTRAINTS = "schedulingConstraints"


def _gated_specs(obj: Object, templates: bool) -> list[tuple[str, dict[str, Any]]]:
    """``(field path, spec)`` of every part of ``obj`` that may carry ``schedulingConstraints``."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    if not templates:
        return [("spec", spec)]
    items = spec.get("podGroupTemplates")
    return [
        (f"spec.podGroupTemplates[{index}]", item)
        for index, item in enumerate(items if isinstance(items, list) else [])
        if isinstance(item, dict)
    ]


def _constraint_causes(path: str, constraints: object) -> list[Cause]:
    if not isinstance(constraints, dict):
        return []
    topology = constraints.get("topology")
    if not isinstance(topology, list):
        return []
    at = f"{path}.{CONSTRAINTS}.topology"
    if len(topology) > 1:
        return [errors.field_cause("FieldValueTooMany", at, f"Too many: {len(topology)}: must have at most 1 items")]
    causes: list[Cause] = []
    for index, item in enumerate(topology):
        key = item.get("key") if isinstance(item, dict) else None
        if not key:
            causes.append(validation.required(f"{at}[{index}].key"))
        elif isinstance(key, str):
            causes += validation.validate_qualified_key(key, f"{at}[{index}].key")
    return causes


class _ConstrainedStrategy(Strategy):
    """Drops or checks ``schedulingConstraints`` (module docstring); ``templates``: in the Workload's
    ``podGroupTemplates`` rather than the PodGroup's ``spec``."""

    templates = False

    def prepare_create(self, new: Object, resource_type: ResourceType) -> None:
        super().prepare_create(new, resource_type)
        self._drop_disabled(new, None, resource_type)

    def prepare_update(self, new: Object, old: Object, resource_type: ResourceType) -> None:
        super().prepare_update(new, old, resource_type)
        self._drop_disabled(new, old, resource_type)

    def _drop_disabled(self, new: Object, old: Object | None, resource_type: ResourceType) -> None:
        if is_enabled(resource_type, TOPOLOGY_AWARE_WORKLOAD_SCHEDULING):
            return
        stored = dict(_gated_specs(old, self.templates)) if old is not None else {}
        for path, spec in _gated_specs(new, self.templates):
            if (stored.get(path) or {}).get(CONSTRAINTS) is None:
                spec.pop(CONSTRAINTS, None)

    def validate_create(self, new: Object, resource_type: ResourceType, field_validation: str) -> list[Cause]:
        causes = super().validate_create(new, resource_type, field_validation)
        for path, spec in _gated_specs(new, self.templates):
            causes += _constraint_causes(path, spec.get(CONSTRAINTS))
        return causes

    def validate_update(
        self, new: Object, old: Object, resource_type: ResourceType, field_validation: str
    ) -> list[Cause]:
        causes = super().validate_update(new, old, resource_type, field_validation)
        stored = dict(_gated_specs(old, self.templates))
        for path, spec in _gated_specs(new, self.templates):
            if path in stored and spec.get(CONSTRAINTS) != stored[path].get(CONSTRAINTS):
                causes.append(
                    validation.invalid_value(f"{path}.{CONSTRAINTS}", spec.get(CONSTRAINTS), "field is immutable")
                )
        return causes


class PodGroupStrategy(_ConstrainedStrategy):
    """PodGroup: ``spec.schedulingConstraints``."""


class SchedulingWorkloadStrategy(_ConstrainedStrategy):
    """Workload (``scheduling.k8s.io``): ``spec.podGroupTemplates[].schedulingConstraints``."""

    templates = True

"""Admission strategies per kind; :func:`strategy_for` picks the one for a resource type."""

from __future__ import annotations

from gang_sim.apiserver.kinds.base import Strategy
from gang_sim.apiserver.kinds.core import (
    CustomResourceDefinitionStrategy,
    NamespaceStrategy,
    NodeStrategy,
    SecretStrategy,
    ServiceStrategy,
)
from gang_sim.apiserver.kinds.custom import CustomResourceStrategy
from gang_sim.apiserver.kinds.jobs import JobStrategy
from gang_sim.apiserver.kinds.pods import PodStrategy, PodTemplateStrategy
from gang_sim.apiserver.kinds.scheduling import PodGroupStrategy, SchedulingWorkloadStrategy
from gang_sim.apiserver.registry import ResourceType

_DEFAULT = Strategy()
_CUSTOM = CustomResourceStrategy()
_BY_STORAGE_KEY: dict[str, Strategy] = {
    "/pods": PodStrategy(),
    "/podtemplates": PodTemplateStrategy(),
    "/secrets": SecretStrategy(),
    "/namespaces": NamespaceStrategy(),
    "/services": ServiceStrategy(),
    "/nodes": NodeStrategy(),
    "batch/jobs": JobStrategy(),
    "apiextensions.k8s.io/customresourcedefinitions": CustomResourceDefinitionStrategy(),
    "scheduling.k8s.io/podgroups": PodGroupStrategy(),
    "scheduling.k8s.io/workloads": SchedulingWorkloadStrategy(),
}


def strategy_for(resource_type: ResourceType) -> Strategy:
    if resource_type.custom:
        return _CUSTOM
    return _BY_STORAGE_KEY.get(resource_type.storage_key, _DEFAULT)


__all__ = ["Strategy", "strategy_for"]

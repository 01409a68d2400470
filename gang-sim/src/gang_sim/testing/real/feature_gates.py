"""The flags that turn Kubernetes' own gang scheduling (KEP-4671, the Workload / PodGroup API) on,
and with it the scenario's alpha gates (``featureGates``).

In v1.37 the API is beta, served as ``scheduling.k8s.io/v1beta1`` (``k8s.io/api scheduling/v1beta1/
types.go``, introduced 1.37), behind the feature gate ``GenericWorkload``, which is off by default
(``k8s.io/kubernetes pkg/features/kube_features.go``: beta since 1.37, ``Default: false``). The gate is
needed by the apiserver (the kinds and ``pod.spec.schedulingGroup``), the scheduler (its default
plugins then include ``GangScheduling``, ``pkg/scheduler/apis/config/v1/default_plugins.go``, and it
runs the pod group scheduling cycle, ``pkg/scheduler/schedule_one_podgroup.go``) and the
controller-manager; the apiserver also needs ``--runtime-config``, as new beta APIs are not served by
default. There is no separate ``GangScheduling`` gate any more in v1.37.

A scenario's ``featureGates`` (``gang_sim.apiserver.feature_gates``) go to the same components:
``TopologyAwareWorkloadScheduling`` (KEP-5732, alpha, off by default) makes the apiserver keep a
PodGroup's ``spec.schedulingConstraints`` and the scheduler add ``TopologyPlacementGenerator`` and
``PodGroupPodsCount`` to its plugins (``applyTopologyAwareWorkloadScheduling``); it depends on
``GenericWorkload`` (``kube_features.go``: a component refuses to start with it on and its dependency
off), so asking for it without the Workload API is refused here first.
"""

from __future__ import annotations

from collections.abc import Iterable

WORKLOAD_API_FEATURE_GATE = "GenericWorkload"
WORKLOAD_API_GROUP_VERSION = "scheduling.k8s.io/v1beta1"
NEEDS_WORKLOAD_API = frozenset({"TopologyAwareWorkloadScheduling"})


def workload_api_flags(enabled: bool, *, apiserver: bool, gates: Iterable[str] = ()) -> list[str]:
    """The component's flags for the Workload API (``apiserver``: with ``--runtime-config``) and the
    alpha ``gates``, or none. ValueError for a gate that needs the Workload API while it is off."""
    gates = sorted(set(gates))
    if not enabled:
        if NEEDS_WORKLOAD_API & set(gates):
            needing = ", ".join(sorted(NEEDS_WORKLOAD_API & set(gates)))
            raise ValueError(f"feature gate {needing} needs {WORKLOAD_API_FEATURE_GATE}: start with workload_api=True")
        return [f"--feature-gates={','.join(f'{gate}=true' for gate in gates)}"] if gates else []
    enabled_gates = ",".join(f"{gate}=true" for gate in [WORKLOAD_API_FEATURE_GATE, *gates])
    flags = [f"--feature-gates={enabled_gates}"]
    return flags + ([f"--runtime-config={WORKLOAD_API_GROUP_VERSION}=true"] if apiserver else [])

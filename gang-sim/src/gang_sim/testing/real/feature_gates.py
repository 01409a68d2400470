"""The flags that turn Kubernetes' own gang scheduling (KEP-4671, the Workload / PodGroup API) on.

In v1.37 the API is beta, served as ``scheduling.k8s.io/v1beta1`` (``k8s.io/api scheduling/v1beta1/
types.go``, introduced 1.37), behind the feature gate ``GenericWorkload``, which is off by default
(``k8s.io/kubernetes pkg/features/kube_features.go``: beta since 1.37, ``Default: false``). The gate is
needed by the apiserver (the kinds and ``pod.spec.schedulingGroup``), the scheduler (its default
plugins then include ``GangScheduling``, ``pkg/scheduler/apis/config/v1/default_plugins.go``, and it
runs the pod group scheduling cycle, ``pkg/scheduler/schedule_one_podgroup.go``) and the
controller-manager; the apiserver also needs ``--runtime-config``, as new beta APIs are not served by
default. There is no separate ``GangScheduling`` gate any more in v1.37.
"""

from __future__ import annotations

WORKLOAD_API_FEATURE_GATE = "GenericWorkload"
WORKLOAD_API_GROUP_VERSION = "scheduling.k8s.io/v1beta1"


def workload_api_flags(enabled: bool, *, apiserver: bool) -> list[str]:
    """The component's flags for the Workload API (``apiserver``: with ``--runtime-config``), or none."""
    if not enabled:
        return []
    flags = [f"--feature-gates={WORKLOAD_API_FEATURE_GATE}=true"]
    return flags + ([f"--runtime-config={WORKLOAD_API_GROUP_VERSION}=true"] if apiserver else [])

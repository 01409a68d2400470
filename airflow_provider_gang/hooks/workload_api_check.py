"""Whether the cluster serves Kubernetes' own gang scheduling (KEP-4671), read from discovery.

``reservation="workload"`` writes ``scheduling.k8s.io/v1beta1`` PodGroups (``kube.resources.
POD_GROUPS``). Kubernetes v1.37 serves that version only with the beta feature gate ``GenericWorkload``
(off by default, k8s.io/kubernetes ``pkg/features/kube_features.go``) on kube-apiserver, kube-scheduler
and kube-controller-manager, and ``--runtime-config=scheduling.k8s.io/v1beta1=true`` on the apiserver
(new beta APIs are not served by default); without the gate on the scheduler the PodGroup would be
served but nobody would enforce it. v1.35/v1.36 served only alpha versions (v1alpha1, v1alpha2) with
other shapes, and v1.37 also v1alpha3, whose PodGroup this provider does not write.

:func:`refusal` is the precheck's reason to refuse a ``workload`` gang; it names the gate and
suggests ``gates``, the mode that builds the same all-or-nothing start by hand.
"""

from __future__ import annotations

from airflow_provider_gang.kube import discovery
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import POD_GROUPS

FEATURE_GATE = "GenericWorkload"
OTHER_VERSIONS = ("v1alpha3", "v1alpha2", "v1alpha1")
"""Versions of ``scheduling.k8s.io`` that may serve the gang API in another shape (named in the refusal)."""


async def is_served(client: KubeClient) -> bool:
    """Whether the cluster serves the PodGroups this provider writes."""
    return await discovery.is_served(client, POD_GROUPS)


async def refusal(client: KubeClient) -> str | None:
    """Why a ``workload`` gang cannot run on this cluster, or ``None`` when the PodGroup API is served."""
    if await is_served(client):
        return None
    others = [
        version
        for version in OTHER_VERSIONS
        if "podgroups" in await discovery.served_plurals(client, f"{POD_GROUPS.group}/{version}")
    ]
    served = f" (it serves PodGroups only as {', '.join(others)}, another shape)" if others else ""
    return (
        f"the cluster does not serve podgroups.{POD_GROUPS.group}/{POD_GROUPS.version}{served}, needed by "
        f"reservation='workload': Kubernetes' own gang scheduling needs v1.37 or later with the feature gate "
        f"{FEATURE_GATE}=true on kube-apiserver, kube-scheduler and kube-controller-manager, and "
        f"--runtime-config={POD_GROUPS.group}/{POD_GROUPS.version}=true on kube-apiserver; or use "
        "reservation='gates' (a ProvisioningRequest, members released together), which needs neither"
    )

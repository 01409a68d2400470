"""How each cloud labels and taints its nodes: a scenario's ``cloud`` (or a pool's own) chooses one.

- ``gke``: spot nodes ``cloud.google.com/gke-spot=true`` (on-demand nodes: no label), no spot
  taint (GKE's default); a reclaimed node gets ``cloud.google.com/impending-node-termination``.
- ``eks``: ``eks.amazonaws.com/capacityType=SPOT`` (on-demand ``ON_DEMAND``), no spot taint; a
  reclaimed node gets the Node Termination Handler's ``aws-node-termination-handler/spot-itn``.
- ``karpenter``: ``karpenter.sh/capacity-type=spot`` (on-demand ``on-demand``), no spot taint; a
  reclaimed node gets ``karpenter.sh/disrupted``.
- ``aks``: ``kubernetes.azure.com/scalesetpriority=spot`` (on-demand: no label) and the taint
  ``kubernetes.azure.com/scalesetpriority=spot:NoSchedule``; a reclaimed node gets no taint (the
  evicted VM's node is deleted).

Sources: GKE https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms; EKS managed node
groups https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html (capacity types) and
aws/aws-node-termination-handler ``pkg/node/node.go`` (``SpotInterruptionTaint``); Karpenter
https://karpenter.sh/docs/concepts/scheduling/ (well-known labels) and
https://karpenter.sh/docs/concepts/disruption/ (``karpenter.sh/disrupted:NoSchedule``); AKS
https://learn.microsoft.com/azure/aks/spot-node-pool. Reservations (a pool's ``reservation``) are
modelled for GKE only (``cloud.google.com/reservation-name``).

Every cloud's reclaim runs the same graceful node shutdown in the emulator
(``controllers.preemption``): only the taint differs. Pool identity keeps GKE's
``cloud.google.com/gke-nodepool`` label on every cloud (the emulator's own bookkeeping reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_CLOUD = "gke"


@dataclass(frozen=True)
class NodeCloud:
    """The labels and taints one cloud puts on its nodes (module docstring)."""

    name: str
    spot_labels: Mapping[str, str]
    on_demand_labels: Mapping[str, str] = field(default_factory=dict)
    spot_taints: tuple[Mapping[str, str], ...] = ()
    """Taints in API form (``{"key", "value", "effect"}``)."""
    reclaim_taint: Mapping[str, str] | None = None
    reservations: bool = False


CLOUDS: Mapping[str, NodeCloud] = {
    cloud.name: cloud
    for cloud in (
        NodeCloud(
            name="gke",
            spot_labels={"cloud.google.com/gke-spot": "true"},
            reclaim_taint={"key": "cloud.google.com/impending-node-termination", "effect": "NoSchedule"},
            reservations=True,
        ),
        NodeCloud(
            name="eks",
            spot_labels={"eks.amazonaws.com/capacityType": "SPOT"},
            on_demand_labels={"eks.amazonaws.com/capacityType": "ON_DEMAND"},
            reclaim_taint={"key": "aws-node-termination-handler/spot-itn", "effect": "NoSchedule"},
        ),
        NodeCloud(
            name="karpenter",
            spot_labels={"karpenter.sh/capacity-type": "spot"},
            on_demand_labels={"karpenter.sh/capacity-type": "on-demand"},
            reclaim_taint={"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
        ),
        NodeCloud(
            name="aks",
            spot_labels={"kubernetes.azure.com/scalesetpriority": "spot"},
            spot_taints=({"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"},),
        ),
    )
}


def capacity_labels(cloud: str, *, spot: bool) -> dict[str, str]:
    """The labels ``cloud`` puts on a spot (or on-demand) node."""
    chosen = CLOUDS[cloud]
    return dict(chosen.spot_labels if spot else chosen.on_demand_labels)


def capacity_taints(cloud: str, *, spot: bool) -> list[dict[str, str]]:
    """The taints ``cloud`` puts on a spot node on its own (none on on-demand nodes), in API form."""
    return [dict(taint) for taint in CLOUDS[cloud].spot_taints] if spot else []


def reclaim_taint(cloud: str) -> dict[str, str] | None:
    """The taint ``cloud`` puts on a node whose VM got its reclaim notice (``None``: none), in API form."""
    taint = CLOUDS[cloud].reclaim_taint
    return None if taint is None else dict(taint)

"""Cloud profiles: how a cluster marks spot capacity, reservations and reclaimed nodes.

A :class:`CloudProfile` holds the node labels and taints the provider places members by and reads a
spot reclaim from; nothing else in the provider names a cloud. The operator's ``cloud`` argument
(``"gke"`` by default, ``"eks"``, ``"karpenter"``, ``"aks"``, or a ``CloudProfile``), else the
Kubernetes connection's extra ``cloud``, chooses it (:func:`profile_of`). What each profile sets:

- ``gke``: spot members select ``cloud.google.com/gke-spot=true`` and tolerate
  ``cloud.google.com/gke-spot=true:NoSchedule``; ``use_reservation`` requires
  ``cloud.google.com/reservation-name``; reclaimed: ``cloud.google.com/impending-node-termination``.
- ``eks``: ``eks.amazonaws.com/capacityType=SPOT``, no toleration, no reservation label (refused);
  reclaimed: ``aws-node-termination-handler/spot-itn``.
- ``karpenter``: ``karpenter.sh/capacity-type=spot``, no toleration, no reservation label (refused);
  reclaimed: ``karpenter.sh/disrupted``, ``aws-node-termination-handler/spot-itn``.
- ``aks``: ``kubernetes.azure.com/scalesetpriority=spot``, tolerating
  ``kubernetes.azure.com/scalesetpriority=spot:NoSchedule``; no reservation label (refused); no
  reclaim taint (a node found deleted counts, as on every cloud).

On-demand members of every profile require ``<spot label> NotIn [<spot value>]``.

Sources:

- GKE: Spot VMs carry ``cloud.google.com/gke-spot=true``; GKE does not taint spot pools unless asked,
  so on-demand members must exclude the label; a reclaimed VM's node gets
  ``cloud.google.com/impending-node-termination`` before graceful node shutdown
  (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms). Nodes of a specific reservation
  carry ``cloud.google.com/reservation-name``
  (https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations).
- EKS managed node groups label every node ``eks.amazonaws.com/capacityType`` ``SPOT`` or ``ON_DEMAND``
  (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html, "Managed node group
  capacity types"). A spot interruption notice is turned into the taint
  ``aws-node-termination-handler/spot-itn`` by the AWS Node Termination Handler with ``TAINT_NODE``
  (``SpotInterruptionTaint`` in aws/aws-node-termination-handler ``pkg/node/node.go``).
- Karpenter labels nodes ``karpenter.sh/capacity-type`` ``spot``, ``on-demand`` (or ``reserved``)
  (https://karpenter.sh/docs/concepts/scheduling/, well-known labels) and taints a node it is about
  to remove - a spot interruption among the reasons - ``karpenter.sh/disrupted:NoSchedule``
  (https://karpenter.sh/docs/concepts/disruption/; ``markDisrupted`` in kubernetes-sigs/karpenter
  ``pkg/controllers/disruption/queue.go``); clusters that run the Node Termination Handler beside it
  get its taint.
- AKS spot node pools carry the label ``kubernetes.azure.com/scalesetpriority=spot`` and the taint
  ``kubernetes.azure.com/scalesetpriority=spot:NoSchedule``
  (https://learn.microsoft.com/azure/aks/spot-node-pool). AKS puts no taint on an evicted node: the
  VM is deleted, and a member's node found gone counts as reclaimed on every cloud
  (``triggers.spot_nodes``).

On-demand members require ``<spot label> NotIn [<spot value>]``, which also matches nodes without
the label (``v1.NodeSelectorRequirement``), so nodes outside any managed pool stay usable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.errors import GangSpecError

__all__ = ["AKS", "EKS", "GKE", "KARPENTER", "PROFILES", "CloudProfile", "profile_of"]


@dataclass(frozen=True)
class CloudProfile:
    """How one cloud marks capacity. Field by field:

    - ``name``: shown in messages and records (``"gke"``, or the user's own).
    - ``spot_label`` / ``spot_value``: the node label spot members select; on-demand members require
      the label ``NotIn [spot_value]``.
    - ``spot_taint``: the taint of spot nodes, as ``key=value:Effect`` or ``key:Effect``, tolerated by
      spot members (``None``: spot nodes carry none).
    - ``reservation_label``: the node label naming the reservation a node consumes, required by
      ``use_reservation`` (``None``: the cloud has none, and ``use_reservation`` is refused).
    - ``preemption_taints``: taint keys that mean a node is being reclaimed; a spot member on such a
      node ends the try ``spot_preempted`` rather than ``member_lost``.
    """

    name: str
    spot_label: str
    spot_value: str
    spot_taint: str | None = None
    reservation_label: str | None = None
    preemption_taints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "preemption_taints", tuple(self.preemption_taints))
        if not isinstance(self.name, str) or not self.name:
            raise GangSpecError("cloud", f"CloudProfile name must be a non-empty string, got {self.name!r}")
        for field, key in (("spot_label", self.spot_label), ("reservation_label", self.reservation_label)):
            if key is not None and (not isinstance(key, str) or not naming.is_qualified_name(key)):
                raise GangSpecError("cloud", f"CloudProfile {field} {key!r} is not a label key ('[prefix/]name')")
        if not isinstance(self.spot_value, str) or not naming.is_label_value(self.spot_value):
            raise GangSpecError("cloud", f"CloudProfile spot_value {self.spot_value!r} is not a label value")
        for key in self.preemption_taints:
            if not isinstance(key, str) or not naming.is_qualified_name(key):
                raise GangSpecError("cloud", f"CloudProfile preemption_taints entry {key!r} is not a taint key")
        if self.spot_taint is not None:
            parse_taint(self.spot_taint)

    @property
    def spot_node_selector(self) -> dict[str, str]:
        """The node selector of spot members."""
        return {self.spot_label: self.spot_value}

    @property
    def not_spot(self) -> dict[str, Any]:
        """The required node-affinity expression of on-demand members."""
        return {"key": self.spot_label, "operator": "NotIn", "values": [self.spot_value]}

    @property
    def spot_toleration(self) -> dict[str, str] | None:
        """The toleration spot members carry, or ``None``."""
        return None if self.spot_taint is None else parse_taint(self.spot_taint)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (stored with the spec); :meth:`from_dict` inverts it."""
        return {
            "name": self.name,
            "spot_label": self.spot_label,
            "spot_value": self.spot_value,
            "spot_taint": self.spot_taint,
            "reservation_label": self.reservation_label,
            "preemption_taints": list(self.preemption_taints),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CloudProfile:
        values = dict(data)
        return cls(**{**values, "preemption_taints": tuple(values.get("preemption_taints") or ())})


def parse_taint(taint: str) -> dict[str, str]:
    """``key=value:Effect`` or ``key:Effect`` as an ``Equal`` / ``Exists`` toleration of that taint."""
    key_value, separator, effect = taint.rpartition(":")
    key, has_value, value = key_value.partition("=")
    if not separator or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute") or not key:
        raise GangSpecError("cloud", f"CloudProfile spot_taint {taint!r} is not 'key=value:Effect' or 'key:Effect'")
    if not naming.is_qualified_name(key) or (has_value and not naming.is_label_value(value)):
        raise GangSpecError("cloud", f"CloudProfile spot_taint {taint!r} has an invalid key or value")
    if has_value:
        return {"key": key, "operator": "Equal", "value": value, "effect": effect}
    return {"key": key, "operator": "Exists", "effect": effect}


NODE_TERMINATION_HANDLER_TAINT = "aws-node-termination-handler/spot-itn"

GKE = CloudProfile(
    name="gke",
    spot_label="cloud.google.com/gke-spot",
    spot_value="true",
    spot_taint="cloud.google.com/gke-spot=true:NoSchedule",
    reservation_label="cloud.google.com/reservation-name",
    preemption_taints=("cloud.google.com/impending-node-termination",),
)
EKS = CloudProfile(
    name="eks",
    spot_label="eks.amazonaws.com/capacityType",
    spot_value="SPOT",
    preemption_taints=(NODE_TERMINATION_HANDLER_TAINT,),
)
KARPENTER = CloudProfile(
    name="karpenter",
    spot_label="karpenter.sh/capacity-type",
    spot_value="spot",
    preemption_taints=("karpenter.sh/disrupted", NODE_TERMINATION_HANDLER_TAINT),
)
AKS = CloudProfile(
    name="aks",
    spot_label="kubernetes.azure.com/scalesetpriority",
    spot_value="spot",
    spot_taint="kubernetes.azure.com/scalesetpriority=spot:NoSchedule",
)
PROFILES: Mapping[str, CloudProfile] = {profile.name: profile for profile in (GKE, EKS, KARPENTER, AKS)}


def profile_of(value: object, *, field: str = "cloud") -> CloudProfile:
    """The profile ``value`` names: a :class:`CloudProfile`, its :meth:`~CloudProfile.to_dict` form,
    or one of :data:`PROFILES`' names. Raises :class:`GangSpecError` naming ``field`` otherwise."""
    if isinstance(value, CloudProfile):
        return value
    if isinstance(value, str) and value in PROFILES:
        return PROFILES[value]
    if isinstance(value, Mapping):
        try:
            return CloudProfile.from_dict(value)
        except TypeError as error:
            raise GangSpecError(field, f"is not a CloudProfile: {error}") from error
    raise GangSpecError(field, f"{value!r} is no cloud profile: use one of {sorted(PROFILES)} or a CloudProfile(...)")

"""The domains a ``gates`` or ``provisioning_request`` gang's members are pinned to: :class:`Placement`.

Chosen once per try before anything of the gang is created (:mod:`.choice`) and kept in the try's
``GangSpec`` (``GangSpec.placement``), so every object of the try - the PodTemplate the
ProvisioningRequest references, the gated and the launched members - carries the same pin, and a try
adopted after its worker stopped builds the very objects it finds. A stored format: the try's plan
holds it (``reservation.records.tries.TryPlan``); fields may be added, never renamed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.reservation.records.reading import record_values


@dataclass(frozen=True)
class Placement:
    """Where a try's members may run. Field by field:

    - ``label``: the node label of the gang's topology (``required_topology`` or ``preferred_topology``);
    - ``domains``: the values of ``label`` the members are pinned to, in rank order (one for a required
      topology; a preferred one that no single domain holds spans the fewest that do);
    - ``grows``: no existing domain held the gang, so capacity is asked in ``domains[0]``: the
      ProvisioningRequest's pod template pins it and the autoscaler grows that domain's node group;
    - ``note``: what the choice saw, for the task log and the Gang view
      (``"no rack has room for 4 members; the best, rack-b1, has room for 2"``).
    """

    label: str
    domains: tuple[str, ...]
    grows: bool = False
    note: str = ""

    def node_requirement(self) -> dict[str, Any]:
        """The node selector requirement every member carries: ``label In domains``."""
        return {"key": self.label, "operator": "In", "values": list(self.domains)}

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "domains": list(self.domains), "grows": self.grows, "note": self.note}

    @classmethod
    def from_dict(cls, data: Any) -> Placement:
        values = record_values(cls, data, {"domains": lambda items: tuple(str(item) for item in items), "grows": bool})
        return cls(**values)

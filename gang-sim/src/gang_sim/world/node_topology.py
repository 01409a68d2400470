"""Where a node sits in the data centre: GKE's topology labels, from a node pool's ``topology`` field.

GKE labels the VMs of its AI Hypercomputer machine types (A3 Ultra, A4, ...) with their physical place
(https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas, "Topology of
GKE nodes"): ``cloud.google.com/gce-topology-block`` (a block: sub-blocks on one network fabric),
``cloud.google.com/gce-topology-subblock`` (a sub-block, or rack: hosts one switch apart) and
``cloud.google.com/gce-topology-host`` (the physical host). Kueue's Topology Aware Scheduling and
the Workload API's topology constraints read such labels, with ``kubernetes.io/hostname`` as the
lowest level.

A pool's ``topology: {block: <value>, subblock: <value>}`` puts the first two on every node of the
pool (``subblock`` optional); every node then also gets ``gce-topology-host`` with a value of its own,
its name (one VM per host, as for the 8-GPU machine types). Values are label values (at most 63
characters, alphanumerics with ``-_.`` inside). Other clouds' or generic topology labels go in the
pool's ``labels``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gang_sim.world.scenario_fields import Fields, ScenarioError

BLOCK_LABEL = "cloud.google.com/gce-topology-block"
SUBBLOCK_LABEL = "cloud.google.com/gce-topology-subblock"
HOST_LABEL = "cloud.google.com/gce-topology-host"
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class PoolTopology:
    """A pool's place: its block and (optional) sub-block."""

    block: str
    subblock: str | None = None

    def labels(self, host: str) -> dict[str, str]:
        """The topology labels of a node of the pool on ``host``."""
        labels = {BLOCK_LABEL: self.block, HOST_LABEL: host}
        if self.subblock is not None:
            labels[SUBBLOCK_LABEL] = self.subblock
        return labels


def parse_pool_topology(fields: Fields, path: str) -> PoolTopology | None:
    """The ``topology`` mapping read through ``fields`` (the pool's); ``None`` when absent."""
    given = fields.has("topology")
    child = fields.child("topology")
    if not given:
        return None
    topology = PoolTopology(
        block=_label_value(child.string("block", required=True), f"{path}.topology.block"),
        subblock=_optional_label_value(child.optionalstring_value("subblock"), f"{path}.topology.subblock"),
    )
    child.reject_unknown()
    return topology


def _label_value(value: str, path: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise ScenarioError(
            path, f"{value!r} is not a label value (at most 63 characters: alphanumerics, and '-', '_', '.' inside)"
        )
    return value


def _optional_label_value(value: str | None, path: str) -> str | None:
    return None if value is None else _label_value(value, path)

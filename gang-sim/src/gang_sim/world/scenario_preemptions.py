"""Spot preemptions: the scenario's ``preemptions:`` list and the on-demand ``POST /_sim/preemptions``.

One preemption is the termination notice Compute Engine sends for a Spot VM
(https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms, "Termination and graceful
shutdown of Spot VMs")::

    preemptions:
    - {at: 600, pool: l4-spot}                 # one node of the pool, chosen with the scenario's seed
    - {at: 900, pool: l4-spot, count: 2, noticeSeconds: 30, podGracePeriodSeconds: 15}
    - {at: 1200, node: gke-sim-l4-spot-b2c4}   # one node by name

Fields: ``at`` (simulated seconds, required), exactly one of ``pool`` / ``node``, ``count`` (nodes of
the pool, default 1), ``noticeSeconds`` (notice to VM stop, default 30: GKE's graceful termination
period) and ``podGracePeriodSeconds`` (the most a pod gets between SIGTERM and SIGKILL, default 15:
the kubelet's ``shutdownGracePeriod`` 30 s minus ``shutdownGracePeriodCriticalPods`` 15 s, GKE's
defaults; at most ``noticeSeconds``). A preemption may name any pool, spot or not: the test decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gang_sim.world.scenario_fields import Fields, ScenarioError

DEFAULT_NOTICE_SECONDS = 30.0
DEFAULT_POD_GRACE_PERIOD_SECONDS = 15.0


@dataclass(frozen=True)
class PreemptionSpec:
    """One termination notice: when, which node (or how many nodes of which pool), how long."""

    at: float
    pool: str | None = None
    node: str | None = None
    count: int = 1
    notice_seconds: float = DEFAULT_NOTICE_SECONDS
    pod_grace_period_seconds: float = DEFAULT_POD_GRACE_PERIOD_SECONDS


def parse_preemption(item: object, path: str, pool_names: list[str] | None) -> PreemptionSpec:
    """Validate one preemption (scenario item or control-call body); ``pool_names`` None skips the
    pool-existence check. Raises :class:`ScenarioError` naming the field."""
    fields = Fields(item, path)
    pool = fields.optionalstring_value("pool")
    node = fields.optionalstring_value("node")
    if (pool is None) == (node is None):
        raise ScenarioError(path or "<body>", "give exactly one of pool or node")
    if pool is not None and pool_names is not None and pool not in pool_names:
        raise ScenarioError(f"{path}.pool" if path else "pool", f"no node pool named {pool!r}")
    count = fields.integer("count", default=1)
    if count < 1:
        raise ScenarioError(f"{path}.count" if path else "count", "must be >= 1")
    if node is not None and count != 1:
        raise ScenarioError(f"{path}.count" if path else "count", "only with pool")
    notice = fields.seconds("noticeSeconds", default=DEFAULT_NOTICE_SECONDS)
    grace = fields.seconds("podGracePeriodSeconds", default=min(DEFAULT_POD_GRACE_PERIOD_SECONDS, notice))
    if grace > notice:
        raise ScenarioError(
            f"{path}.podGracePeriodSeconds" if path else "podGracePeriodSeconds",
            f"must be at most noticeSeconds ({notice:g})",
        )
    spec = PreemptionSpec(
        at=fields.seconds("at", required=True),
        pool=pool,
        node=node,
        count=count,
        notice_seconds=notice,
        pod_grace_period_seconds=grace,
    )
    fields.reject_unknown()
    return spec


def describe(spec: PreemptionSpec) -> Mapping[str, object]:
    """The JSON form of ``spec`` (``GET /_sim/preemptions``)."""
    body: dict[str, object] = {
        "at": spec.at,
        "count": spec.count,
        "noticeSeconds": spec.notice_seconds,
        "podGracePeriodSeconds": spec.pod_grace_period_seconds,
    }
    body["pool" if spec.pool is not None else "node"] = spec.pool if spec.pool is not None else spec.node
    return body

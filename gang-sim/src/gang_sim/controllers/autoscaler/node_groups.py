"""The node groups as the ProvisioningRequest processor sees them: a narrow interface, not the autoscaler.

Upstream, the ProvisioningRequest classes (``cluster-autoscaler/provisioningrequest/orchestrator/
orchestrator.go`` and the ``checkcapacity`` / ``besteffortatomic`` processors) never reach into the
static autoscaler: they read a cluster snapshot, list the cloud provider's node groups with their
template nodes, and grow a group through ``cloudprovider.NodeGroup`` (``IncreaseSize`` /
``AtomicIncreaseSize``, ``DeleteNodes``; ``cluster-autoscaler/cloudprovider/cloud_provider.go``).
:class:`NodeGroups` is that view for :class:`~.provisioner.RequestProcessor`;
:class:`~.cluster_autoscaler.ClusterAutoscaler` implements it structurally and hands itself over.

:func:`group_options` turns the simulated :class:`~gang_sim.world.cloud.Cloud` pools
into the planner's :class:`~.scaleup.GroupOption` list; both the ordinary scale-up and the request
processor use it.
"""

from __future__ import annotations

from typing import Protocol

from gang_sim.controllers.autoscaler.scaleup import Bin, GroupOption
from gang_sim.controllers.base import Obj
from gang_sim.world.cloud import Cloud, NodeRecord, node_manifest


class NodeGroups(Protocol):
    """What the ProvisioningRequest processor may ask of the node groups, and nothing more."""

    def group_options(self, now: float, *, queued: bool) -> list[GroupOption]:
        """The groups that may grow at ``now`` with their template node and headroom
        (``CloudProvider.NodeGroups()`` with ``NodeGroup.TemplateNodeInfo()``); ``queued`` selects the
        queued-provisioning pools instead of the ordinary ones."""
        ...

    def node_bins(self, pods: list[Obj], nodes: list[Obj]) -> list[Bin]:
        """The cluster snapshot: registered nodes with their free capacity under ``pods``, then the
        nodes still being provisioned (empty), as ``ClusterSnapshot`` holds upcoming nodes."""
        ...

    def add_nodes(
        self, pool_name: str, count: int, now: float, *, provisioning_request: str | None = None
    ) -> list[NodeRecord]:
        """Grow ``pool_name`` by ``count`` nodes at once (``NodeGroup.AtomicIncreaseSize``), labelled
        for ``provisioning_request`` when given; return the new nodes."""
        ...

    def remove_node(self, name: str, now: float) -> None:
        """Delete one node and its Node object (``NodeGroup.DeleteNodes``)."""
        ...

    def is_registered(self, name: str) -> bool:
        """Whether the node's kubelet has registered its Node object (the VM finished booting)."""
        ...

    def nodes_provisioned_for(self, provisioning_request: str) -> list[NodeRecord]:
        """The live nodes an increase labelled for ``provisioning_request`` created: on GKE the resize
        request is the cloud's record, which outlives a restart of the autoscaler
        (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest)."""
        ...


def group_options(cloud: Cloud, now: float, *, queued: bool) -> list[GroupOption]:
    """Node groups the autoscaler may grow now (queued-provisioning pools only for DWS requests)."""
    options = []
    for pool in cloud.scenario.node_pools:
        if pool.queued_provisioning != queued:
            continue
        template = node_manifest(
            pool, NodeRecord(name=f"template-{pool.name}", pool=pool.name, gpus=0, created_at=0, ready_at=0)
        )
        options.append(GroupOption(pool.name, template, cloud.headroom(pool, now)))
    return options

"""Node registration: the Node object a booted VM's kubelet creates for itself.

As the kubelet's ``registerWithAPIServer`` (``pkg/kubelet/kubelet_node_status.go``) does, the object
is created first and its status then written through the ``status`` subresource. The control plane
registers the scenario's initial nodes with it and the cluster-autoscaler the nodes it provisioned
once their boot delay has passed; neither depends on the other for it.
"""

from __future__ import annotations

from gang_sim.apiserver.store import Store
from gang_sim.controllers.base import Obj
from gang_sim.world.cloud import NodeRecord, node_manifest
from gang_sim.world.scenario import NodePool


def register_node(store: Store, pool: NodePool, record: NodeRecord) -> Obj:
    """Create the Node object for ``record`` (status written through the status subresource)."""
    manifest = node_manifest(pool, record)
    status = manifest.pop("status")
    node = store.create("v1/nodes", manifest)
    if node.get("status") != status:
        node = store.patch("v1/nodes", record.name, {"status": status}, subresource="status")
    return node

"""The scenario's node pools as kwok nodes: the same labels, taints and capacity ``gang-sim`` gives them.

A pool's ``initialNodes`` become Nodes at start (``<pool>-<index>``), made by
:func:`gang_sim.world.cloud.node_manifest` so both backends label them alike (GKE's
node-pool, accelerator, spot and reservation labels, the zone and region), and annotated
``kwok.x-k8s.io/node: fake`` - the annotation the kwok controller is told to manage, and the one the
cluster-autoscaler's kwok provider puts on the nodes it creates
(kubernetes/autoscaler ``cluster-autoscaler/cloudprovider/kwok/kwok_constants.go``). Growth beyond
``initialNodes`` is the cluster-autoscaler's, from the templates of :func:`autoscaler_templates`.
"""

from __future__ import annotations

from typing import Any

from gang_sim.world.cloud import HOSTNAME_LABEL, NodeRecord, node_manifest
from gang_sim.world.node_topology import HOST_LABEL
from gang_sim.world.scenario import NodePool, Scenario

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_MANAGED_SELECTOR = f"{KWOK_NODE_ANNOTATION}=fake"
NODE_GROUP_LABEL = "cloud.google.com/gke-nodepool"
_MIN_COUNT = "cluster-autoscaler.kwok.nodegroup/min-count"
_MAX_COUNT = "cluster-autoscaler.kwok.nodegroup/max-count"
_DESIRED_COUNT = "cluster-autoscaler.kwok.nodegroup/desired-count"


def kwok_node(pool: NodePool, name: str) -> dict[str, Any]:
    """The Node for ``name`` of ``pool``, for the kwok controller to run."""
    node = node_manifest(pool, NodeRecord(name=name, pool=pool.name, gpus=pool.gpus_per_node, created_at=0, ready_at=0))
    node["metadata"]["annotations"] = {KWOK_NODE_ANNOTATION: "fake"}
    status = node["status"]
    # kwok's node-initialize stage writes conditions, addresses and nodeInfo; capacity is ours.
    node["status"] = {"capacity": status["capacity"], "allocatable": status["allocatable"]}
    return node


def initial_nodes(scenario: Scenario) -> list[dict[str, Any]]:
    """Every pool's ``initialNodes`` as kwok Nodes, in pool order."""
    return [
        kwok_node(pool, f"{pool.name}-{index}") for pool in scenario.node_pools for index in range(pool.initial_nodes)
    ]


def autoscaler_templates(scenario: Scenario) -> dict[str, Any]:
    """A ``v1`` List of template Nodes, one per pool, for the kwok cloud provider's templates ConfigMap.

    The provider groups nodes by the label named in its config (``nodegroups.fromNodeLabelKey``, here
    the GKE node-pool label) and reads a group's bounds from the template's
    ``cluster-autoscaler.kwok.nodegroup/{min,max,desired}-count`` annotations
    (``kwok_provider.go``, ``kwok_helpers.go``); the desired count is the pool's ``initialNodes``, the
    nodes :func:`initial_nodes` creates, which carry the group label and so belong to the group. A
    node the provider adds is the template renamed, with the template's labels
    (``kwok_nodegroups.go``, ``IncreaseSize``): the template has no ``kubernetes.io/hostname`` (nor a
    pool topology's ``cloud.google.com/gce-topology-host``), so that each added node gets its own name
    as its hostname from kwok (:func:`gang_sim.testing.real.stages.node_hostname_stage`), as a kubelet
    labels its node.
    """
    items = []
    for pool in scenario.node_pools:
        template = kwok_node(pool, f"{pool.name}-template")
        for per_node in (HOSTNAME_LABEL, HOST_LABEL):
            template["metadata"]["labels"].pop(per_node, None)
        bounds = {
            _MIN_COUNT: str(pool.min_nodes),
            _MAX_COUNT: str(pool.max_nodes),
            _DESIRED_COUNT: str(pool.initial_nodes),
        }
        template["metadata"]["annotations"].update(bounds)
        items.append(template)
    return {"apiVersion": "v1", "kind": "List", "items": items}

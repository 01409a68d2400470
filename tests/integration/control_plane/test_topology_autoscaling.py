"""The emulated cluster-autoscaler and topology labels, on the ``topology`` scenario: a
ProvisioningRequest whose pod template selects a rack (``cloud.google.com/gce-topology-subblock``)
grows that rack's node group and no other, because only that group's template node carries the
label (the autoscaler simulates the pods on each group's template, as the real one's
``TemplateNodeInfo`` does; the real tier's kwok provider copies the template's labels too)."""

from __future__ import annotations

from collections.abc import Callable

from gang_sim.testing.pytest_plugin import SimCluster
from gang_sim.world.node_topology import BLOCK_LABEL, HOST_LABEL, SUBBLOCK_LABEL
from tests.builders import gpu_pod_spec
from tests.integration.control_plane.kueue_setup import ATOMIC


def rack_nodes(cluster: SimCluster, rack: str) -> list[dict[str, str]]:
    return [node.metadata.labels for node in cluster.core.list_node(label_selector=f"{SUBBLOCK_LABEL}={rack}").items]


def test_a_request_pinned_to_the_autoscaled_rack_grows_it_with_its_topology_labels(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    cluster = sim_cluster("topology")
    cluster.create_pod_template("rack-b2", gpu_pod_spec(nodeSelector={SUBBLOCK_LABEL: "rack-b2"}))
    cluster.create_request("gang", "rack-b2", 6, ATOMIC)
    cluster.advance(120)  # a scan, then the pool's 60 s provisioning delay
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("True", "CapacityIsProvisioned")
    grown = rack_nodes(cluster, "rack-b2")
    assert len(grown) == 2  # six 1-GPU pods on 4-GPU hosts
    assert {labels[BLOCK_LABEL] for labels in grown} == {"block-b"}
    assert len({labels[HOST_LABEL] for labels in grown}) == 2
    assert {labels["kubernetes.io/hostname"] for labels in grown} == {labels[HOST_LABEL] for labels in grown}
    assert len(rack_nodes(cluster, "rack-b1")) == 2  # the other racks did not change


def test_a_request_pinned_to_a_full_fixed_rack_is_not_found(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster("topology")
    cluster.advance(10)  # the fillers hold their GPUs
    cluster.create_pod_template("rack-b1", gpu_pod_spec(nodeSelector={SUBBLOCK_LABEL: "rack-b1"}))
    cluster.create_request("gang", "rack-b1", 7, ATOMIC)
    cluster.advance(30)
    assert cluster.conditions(cluster.request("gang"))["Provisioned"] == ("False", "CapacityIsNotFound")
    assert rack_nodes(cluster, "rack-b2") == []

"""The ProvisioningRequest processor works through ``NodeGroups`` alone.

The processor is driven here on a real Store and Cloud, with node groups that are not the
cluster-autoscaler: a small implementation over the same Cloud whose node registration the test
decides. What it asks of them (increase a group, delete nodes, is a node registered) is recorded, so
the tests show that the protocol carries every decision the request classes make.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from gang_sim.apiserver.crds import install_bundled_crds
from gang_sim.apiserver.store import Store
from gang_sim.controllers import plane
from gang_sim.controllers.autoscaler import node_groups
from gang_sim.controllers.autoscaler import provisioning as pr
from gang_sim.controllers.autoscaler.provisioner import RequestProcessor
from gang_sim.controllers.autoscaler.scaleup import Bin, GroupOption
from gang_sim.controllers.base import Controller, ControlPlane, Obj
from gang_sim.world.clock import ManualClock
from gang_sim.world.cloud import POOL_LABEL, QUEUED_LABEL, Cloud, NodeRecord, node_manifest
from gang_sim.world.scenario import Scenario, parse_scenario

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
POOL = {
    "zone": "us-central1-a",
    "gpuType": "nvidia-l4",
    "gpusPerNode": 4,
    "cpu": "48",
    "memory": "192Gi",
    "taints": [GPU_TAINT],
    "provisioningDelaySeconds": 90,
}
SCENARIO = parse_scenario(
    {
        "name": "node-groups",
        "nodePools": [
            {"name": "l4", "maxNodes": 3, "initialNodes": 1, **POOL},
            {"name": "dws-l4", "maxNodes": 4, "queuedProvisioning": True, **POOL},
        ],
        "autoscaler": {"queuedProvisioningDelaySeconds": 120},
    }
)
WORKER = {
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "containers": [
        {
            "name": "worker",
            "image": "registry.example/trainer:1.0",
            "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}},
        }
    ],
}


@dataclass
class RecordingNodeGroups:
    """Node groups over a Cloud; nodes count as registered only once :meth:`register` is called."""

    cloud: Cloud
    registered: set[str] = field(default_factory=set)
    increases: list[tuple[str, int, str | None]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def group_options(self, now: float, *, queued: bool) -> list[GroupOption]:
        return node_groups.group_options(self.cloud, now, queued=queued)

    def node_bins(self, pods: list[Obj], nodes: list[Obj]) -> list[Bin]:
        return [Bin.empty(node) for node in nodes]

    def add_nodes(
        self, pool_name: str, count: int, now: float, *, provisioning_request: str | None = None
    ) -> list[NodeRecord]:
        self.increases.append((pool_name, count, provisioning_request))
        pool = self.cloud.scenario.pool(pool_name)
        return [self.cloud.add_node(pool, now, provisioning_request=provisioning_request) for _ in range(count)]

    def remove_node(self, name: str, now: float) -> None:
        self.removed.append(name)
        self.cloud.remove_node(name, now)

    def is_registered(self, name: str) -> bool:
        return name in self.registered

    def nodes_provisioned_for(self, provisioning_request: str) -> list[NodeRecord]:
        return self.cloud.provisioned_for(provisioning_request)

    def register(self) -> None:
        self.registered.update(record.name for record in self.cloud.live_nodes())


class RequestsOnly(Controller):
    """A controller that runs only the ProvisioningRequest classes, on ``groups``."""

    component = "cluster-autoscaler"

    def __init__(self, control_plane: ControlPlane, groups: RecordingNodeGroups) -> None:
        super().__init__(control_plane)
        self.requests = RequestProcessor(self, node_groups=groups)

    def reconcile(self, now: float) -> float | None:
        pods, _ = self.store.list("v1/pods")
        nodes, _ = self.store.list("v1/nodes")
        self.requests.process(now, pods, nodes)
        return None


def started(scenario: Scenario = SCENARIO) -> tuple[Store, RequestsOnly, RecordingNodeGroups]:
    store = Store()
    install_bundled_crds(store)
    running = plane.build(store, scenario, ManualClock(), controllers=[])
    groups = RecordingNodeGroups(running.plane.cloud)
    groups.register()
    store.create(
        "v1/podtemplates",
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "worker"}, "template": {"spec": WORKER}},
        "default",
    )
    return store, RequestsOnly(running.plane, groups), groups


def create_request(store: Store, class_name: str, count: int, **parameters: str) -> None:
    spec: dict[str, Any] = {
        "provisioningClassName": class_name,
        "podSets": [{"podTemplateRef": {"name": "worker"}, "count": count}],
    }
    if parameters:
        spec["parameters"] = parameters
    body = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "gang"},
        "spec": spec,
    }
    store.create(pr.PROVISIONING_REQUESTS, body, "default")


def conditions(store: Store) -> dict[str, tuple[str, str]]:
    request = store.get(pr.PROVISIONING_REQUESTS, "gang", "default")
    return {item["type"]: (item["status"], item["reason"]) for item in request["status"]["conditions"]}


def test_group_options_are_the_pools_of_the_requested_kind_with_their_headroom() -> None:
    cloud = Cloud(SCENARIO, random.Random(0))
    cloud.add_initial_node(SCENARIO.pool("l4"))
    ordinary = node_groups.group_options(cloud, 0.0, queued=False)
    queued = node_groups.group_options(cloud, 0.0, queued=True)
    assert [(option.name, option.headroom) for option in ordinary] == [("l4", 2)]
    assert [(option.name, option.headroom) for option in queued] == [("dws-l4", 4)]
    assert queued[0].template["metadata"]["labels"][QUEUED_LABEL] == "true"
    assert ordinary[0].template == node_manifest(
        SCENARIO.pool("l4"), NodeRecord(name="template-l4", pool="l4", gpus=0, created_at=0, ready_at=0)
    )
    assert ordinary[0].template["metadata"]["labels"][POOL_LABEL] == "l4"


def test_an_atomic_request_grows_one_group_by_what_the_existing_nodes_cannot_hold() -> None:
    store, controller, groups = started()
    create_request(store, pr.BEST_EFFORT_ATOMIC, 3)
    controller.reconcile(10.0)
    assert groups.increases == [("l4", 2, None)]  # the registered l4 node holds one worker
    assert conditions(store)["Provisioned"] == ("True", "CapacityIsProvisioned")
    added = {record.name for record in groups.cloud.live_nodes("l4") if record.created_at == 10.0}
    assert len(added) == 2
    assert controller.requests.protected_nodes() == added  # booked until consumed or expired


def test_a_queued_request_is_provisioned_once_its_nodes_register_and_revoked_through_the_groups() -> None:
    store, controller, groups = started()
    create_request(store, pr.QUEUED_PROVISIONING, 2, maxRunDurationSeconds="600")
    controller.reconcile(0.0)
    assert conditions(store) == {"Accepted": ("True", "SuccessfullyQueued")}
    controller.reconcile(120.0)  # queuedProvisioningDelaySeconds later every node is asked for at once
    ((pool, count, label),) = groups.increases
    assert (pool, count, label is not None and label.startswith("resize-")) == ("dws-l4", 2, True)
    controller.reconcile(210.0)  # booted, but no kubelet has registered yet
    assert "Provisioned" not in conditions(store)
    groups.register()
    controller.reconcile(220.0)
    assert conditions(store)["Provisioned"] == ("True", "Provisioned")
    details = store.get(pr.PROVISIONING_REQUESTS, "gang", "default")["status"]["provisioningClassDetails"]
    assert details == {"ResizeRequestName": label}
    controller.reconcile(719.0)  # maxRunDurationSeconds counts from node creation (120 s)
    assert groups.removed == []
    controller.reconcile(720.0)
    assert sorted(groups.removed) == sorted(
        record.name for record in groups.cloud.nodes.values() if record.pool == "dws-l4"
    )
    assert conditions(store)["CapacityRevoked"] == ("True", "MaxRunDurationSecondsReached")

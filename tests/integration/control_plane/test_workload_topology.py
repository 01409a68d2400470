"""The Workload API's topology-aware gang scheduling (KEP-5732) on the ``topology`` scenario, through the API.

With ``TopologyAwareWorkloadScheduling`` on (the scenario's ``featureGates``) a PodGroup whose
``spec.schedulingConstraints.topology`` names a node label is bound whole in one domain of it, or
not at all, as the v1.37 kube-scheduler's placement algorithm does; with the gate off the apiserver
drops the constraint and the gang is scheduled as any other.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gang_sim.controllers.gang_scheduling import POD_GROUPS
from gang_sim.testing import ClusterHarness
from gang_sim.world.node_topology import SUBBLOCK_LABEL
from gang_sim.world.scenario import load_scenario
from tests.builders import gpu_pod_spec


@pytest.fixture
def topology() -> Iterator[Callable[..., ClusterHarness]]:
    started: list[ClusterHarness] = []

    def start(*, gate: bool = True) -> ClusterHarness:
        scenario = load_scenario("topology")
        harness = ClusterHarness(scenario if gate else dataclasses.replace(scenario, feature_gates=frozenset()))
        harness.start()
        started.append(harness)
        harness.advance(10)  # the fillers are bound
        return harness

    yield start
    for harness in started:
        harness.stop()


def start_gang(cluster: ClusterHarness, name: str, size: int, key: str | None = SUBBLOCK_LABEL) -> None:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": size}}}
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    cluster.create(
        POD_GROUPS,
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec},
        "default",
    )
    for index in range(size):
        pod_spec = {**gpu_pod_spec(), "schedulingGroup": {"podGroupName": name}}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{index}", "labels": {"gang": name}},
            "spec": pod_spec,
        }
        cluster.create("v1/pods", body, "default")
    cluster.advance(5)


def racks(cluster: ClusterHarness, gang: str) -> Counter[str]:
    nodes = {node["metadata"]["name"]: node["metadata"]["labels"] for node in cluster.objects("v1/nodes")}
    pods = cluster.objects("v1/pods", "default", label_selector=f"gang={gang}")
    return Counter(nodes[pod["spec"]["nodeName"]].get(SUBBLOCK_LABEL) for pod in pods if pod["spec"].get("nodeName"))


def outcome(cluster: ClusterHarness, name: str) -> tuple[str, str, str]:
    (group,) = [item for item in cluster.objects(POD_GROUPS, "default") if item["metadata"]["name"] == name]
    (condition,) = group["status"]["conditions"]
    return condition["status"], condition["reason"], condition["message"]


def pod_messages(cluster: ClusterHarness, gang: str) -> set[str]:
    pods = cluster.objects("v1/pods", "default", label_selector=f"gang={gang}")
    return {item["message"] for pod in pods for item in pod["status"]["conditions"] if item["type"] == "PodScheduled"}


def test_a_gang_of_four_with_a_rack_constraint_binds_in_the_one_rack_that_holds_it(
    topology: Callable[..., ClusterHarness],
) -> None:
    cluster = topology()
    start_gang(cluster, "four", 4)
    assert racks(cluster, "four") == {"rack-b1": 4}
    assert outcome(cluster, "four") == ("True", "Scheduled", "")


def test_a_gang_no_rack_holds_binds_nothing_and_says_so(topology: Callable[..., ClusterHarness]) -> None:
    cluster = topology()
    start_gang(cluster, "seven", 7)
    # the first placement (rack-a1, in name order; the real scheduler's is random) stopped when two had
    # fit and four were left: six, never seven
    message = (
        "pod group is unschedulable, 0/3 placements are available, first placement status: minCount (7) cannot "
        "be satisfied: 2 scheduled, 4 remaining, pod group preemption: No preemption victims found for incoming "
        "preemptor"
    )
    assert racks(cluster, "seven") == {}
    assert outcome(cluster, "seven") == ("False", "Unschedulable", message)
    assert pod_messages(cluster, "seven") == {f"pod group is unschedulable, {message}"}


def test_a_label_no_node_has_gives_no_placement(topology: Callable[..., ClusterHarness]) -> None:
    cluster = topology()
    start_gang(cluster, "nowhere", 2, key="example.com/row")
    assert racks(cluster, "nowhere") == {}
    assert outcome(cluster, "nowhere") == (
        "False",
        "Unschedulable",
        "no feasible placements found, pod group preemption: No preemption victims found for incoming preemptor",
    )
    assert pod_messages(cluster, "nowhere") == {"no feasible placements found"}


def test_of_the_racks_that_hold_it_the_gang_takes_a_fuller_one(topology: Callable[..., ClusterHarness]) -> None:
    cluster = topology()
    start_gang(cluster, "two", 2)
    (rack,) = racks(cluster, "two")
    assert rack in ("rack-a1", "rack-a2")  # MostAllocated: rack-b1 has the most room left, so it scores lowest


def test_with_the_gate_off_the_constraint_is_dropped_and_the_gang_spreads(
    topology: Callable[..., ClusterHarness],
) -> None:
    cluster = topology(gate=False)
    start_gang(cluster, "seven", 7)
    (group,) = cluster.objects(POD_GROUPS, "default")
    assert "schedulingConstraints" not in group["spec"]
    assert sum(racks(cluster, "seven").values()) == 7
    assert len(racks(cluster, "seven")) > 1

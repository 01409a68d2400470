"""The emulator's kube-scheduler on PodGroups (``gang_sim.controllers.gang_scheduling``): a gang's
``minCount`` pods are bound in one pass or none, as the v1.37 ``GangScheduling`` plugin and pod
group cycle do; the PodGroup's ``PodGroupInitiallyScheduled`` condition says which."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gang_sim.testing import ClusterHarness

POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"
THREE_NODES = {
    "name": "three-nodes",
    "nodePools": [{"name": "cpu", "zone": "z", "cpu": "4", "memory": "16Gi", "minNodes": 3, "maxNodes": 3}],
}
"""Three nodes with room for one 3-CPU pod each, never more."""


@pytest.fixture
def cluster() -> Iterator[ClusterHarness]:
    with ClusterHarness(THREE_NODES) as harness:
        harness.advance(60)  # the nodes register
        yield harness


def pod_group(name: str, policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": policy},
    }


def member(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"group": group}},
        "spec": {
            "schedulingGroup": {"podGroupName": group},
            "containers": [{"name": "main", "image": "x", "resources": {"requests": {"cpu": "3"}}}],
        },
    }


def settle(cluster: ClusterHarness) -> None:
    cluster.advance(1)
    cluster.run(lambda: None)  # the controllers' passes queued before this one have run


def bound(cluster: ClusterHarness, group: str) -> list[str]:
    pods = cluster.objects("v1/pods", "default", label_selector=f"group={group}")
    return sorted(pod["metadata"]["name"] for pod in pods if pod["spec"].get("nodeName"))


def outcome(cluster: ClusterHarness, name: str) -> tuple[str, str] | None:
    (group,) = [item for item in cluster.objects(POD_GROUPS, "default") if item["metadata"]["name"] == name]
    for condition in (group.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodGroupInitiallyScheduled":
            return condition["status"], condition["reason"]
    return None


def start(cluster: ClusterHarness, group: str, members: int, policy: dict[str, Any]) -> None:
    cluster.create(POD_GROUPS, pod_group(group, policy), "default")
    for index in range(members):
        cluster.create("v1/pods", member(f"{group}-{index}", group), "default")
    settle(cluster)


def test_a_gang_that_does_not_fit_whole_binds_none_and_says_unschedulable(cluster: ClusterHarness) -> None:
    start(cluster, "four", 4, {"gang": {"minCount": 4}})
    assert bound(cluster, "four") == []
    assert outcome(cluster, "four") == ("False", "Unschedulable")
    pods = cluster.objects("v1/pods", "default", label_selector="group=four")
    messages = {condition["message"] for pod in pods for condition in pod["status"]["conditions"]}
    assert all("only 3 of the 4 pods" in message for message in messages), messages


def test_a_gang_that_fits_binds_every_member_in_one_pass_and_says_scheduled(cluster: ClusterHarness) -> None:
    start(cluster, "three", 3, {"gang": {"minCount": 3}})
    assert bound(cluster, "three") == ["three-0", "three-1", "three-2"]
    assert outcome(cluster, "three") == ("True", "Scheduled")


def test_fewer_pods_than_min_count_wait_unjudged_until_the_last_one_comes(cluster: ClusterHarness) -> None:
    start(cluster, "late", 2, {"gang": {"minCount": 3}})
    assert bound(cluster, "late") == [] and outcome(cluster, "late") is None
    cluster.create("v1/pods", member("late-2", "late"), "default")
    settle(cluster)
    assert bound(cluster, "late") == ["late-0", "late-1", "late-2"]


def test_pods_wait_for_their_pod_group_to_exist(cluster: ClusterHarness) -> None:
    for index in range(2):
        cluster.create("v1/pods", member(f"orphan-{index}", "orphan"), "default")
    settle(cluster)
    assert bound(cluster, "orphan") == []
    cluster.create(POD_GROUPS, pod_group("orphan", {"gang": {"minCount": 2}}), "default")
    settle(cluster)
    assert bound(cluster, "orphan") == ["orphan-0", "orphan-1"]


def test_a_basic_policy_schedules_pod_by_pod(cluster: ClusterHarness) -> None:
    start(cluster, "basic", 4, {"basic": {}})
    assert len(bound(cluster, "basic")) == 3


def test_min_count_below_the_members_binds_those_that_fit(cluster: ClusterHarness) -> None:
    start(cluster, "elastic", 4, {"gang": {"minCount": 2}})
    assert len(bound(cluster, "elastic")) == 3
    assert outcome(cluster, "elastic") == ("True", "Scheduled")

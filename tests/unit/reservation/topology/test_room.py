"""What the nodes hold (``reservation.topology.room``): which nodes a member may run on, what is free
there, what a member needs, and answers it cannot read."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from airflow_provider_gang.reservation.errors import MalformedObject
from airflow_provider_gang.reservation.topology import room
from tests.builders import GPU, gpu_pod_spec
from tests.unit.reservation.topology.cluster import MEMBER, filler, ready_node

LABELS = {"rack": "r1", "kubernetes.io/hostname": "n1"}


def with_affinity(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(expressions)}
    if fields:
        term["matchFields"] = list(fields)
    required = {"nodeSelectorTerms": [term]}
    return gpu_pod_spec(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}})


ELIGIBILITY = [
    ("plain", {}, MEMBER, True),
    ("cordoned", {"spec": {"unschedulable": True}}, MEMBER, False),
    ("not-ready", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, MEMBER, False),
    ("no-conditions", {"status": {"conditions": []}}, MEMBER, False),
    ("selector-matches", {}, gpu_pod_spec(nodeSelector={"rack": "r1"}), True),
    ("selector-differs", {}, gpu_pod_spec(nodeSelector={"rack": "r2"}), False),
    ("in", {}, with_affinity({"key": "rack", "operator": "In", "values": ["r0", "r1"]}), True),
    ("not-in", {}, with_affinity({"key": "rack", "operator": "NotIn", "values": ["r1"]}), False),
    ("not-in-missing-label", {}, with_affinity({"key": "spot", "operator": "NotIn", "values": ["true"]}), True),
    ("exists", {}, with_affinity({"key": "rack", "operator": "Exists"}), True),
    ("does-not-exist", {}, with_affinity({"key": "rack", "operator": "DoesNotExist"}), False),
    ("gt", {"labels": {"gen": "5"}}, with_affinity({"key": "gen", "operator": "Gt", "values": ["4"]}), True),
    ("lt", {"labels": {"gen": "5"}}, with_affinity({"key": "gen", "operator": "Lt", "values": ["4"]}), False),
    (
        "gt-not-a-number",
        {"labels": {"gen": "v5"}},
        with_affinity({"key": "gen", "operator": "Gt", "values": ["4"]}),
        False,
    ),
    ("empty-term", {}, with_affinity(), False),
    ("match-fields", {}, with_affinity(fields=({"key": "metadata.name", "operator": "In", "values": ["n1"]},)), True),
    (
        "match-fields-other",
        {},
        with_affinity(fields=({"key": "metadata.name", "operator": "In", "values": ["x"]},)),
        False,
    ),
    ("untolerated-taint", {}, {"containers": MEMBER["containers"]}, False),
    ("prefer-no-schedule-ignored", {"taints": [{"key": "x", "effect": "PreferNoSchedule"}]}, MEMBER, True),
    (
        "tolerate-all",
        {"taints": [{"key": "x", "effect": "NoExecute"}]},
        gpu_pod_spec(tolerations=[{"operator": "Exists"}]),
        True,
    ),
    (
        "toleration-of-another-effect",
        {"taints": [{"key": "x", "effect": "NoSchedule"}]},
        gpu_pod_spec(
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}, {"operator": "Exists", "effect": "NoExecute"}]
        ),
        False,
    ),
    (
        "equal-toleration",
        {"taints": [{"key": "x", "value": "a", "effect": "NoSchedule"}]},
        gpu_pod_spec(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}, {"key": "x", "value": "a"}]),
        True,
    ),
    (
        "equal-toleration-other-value",
        {"taints": [{"key": "x", "value": "a", "effect": "NoSchedule"}]},
        gpu_pod_spec(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}, {"key": "x", "value": "b"}]),
        False,
    ),
]


@pytest.mark.parametrize(
    ("change", "member", "eligible"), [case[1:] for case in ELIGIBILITY], ids=[case[0] for case in ELIGIBILITY]
)
def test_which_nodes_a_member_may_run_on(change: dict[str, Any], member: dict[str, Any], eligible: bool) -> None:
    built = ready_node("n1", {**LABELS, **change.get("labels", {})})
    built["spec"].update(change.get("spec", {}))
    built["spec"]["taints"] += change.get("taints", [])
    built["status"].update(change.get("status", {}))
    assert room.is_eligible(built, member) is eligible


def test_what_is_free_is_allocatable_less_the_bound_pods_that_run() -> None:
    nodes = [ready_node("n1", LABELS), ready_node("n2", {**LABELS, "kubernetes.io/hostname": "n2"})]
    pods = [
        filler("a", "n1", 3),
        filler("done", "n1", 4, phase="Succeeded"),
        filler("failed", "n1", 4, phase="Failed"),
        filler("mine", "n2", 4, namespace="ml"),
    ]
    found = room.rooms(nodes, pods, MEMBER, leave_out=frozenset({"ml/mine"}))
    assert [(item.name, item.free[GPU], item.free["pods"]) for item in found] == [
        ("n1", Decimal(1), Decimal(109)),
        ("n2", Decimal(4), Decimal(110)),
    ]
    assert [item.members_fit(room.member_requests(MEMBER)) for item in found] == [1, 4]


def test_a_member_needs_its_containers_sum_or_its_largest_init_container_and_the_overhead() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {GPU: "2"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "4"}}}],
        "overhead": {"memory": "100Mi"},
    }
    assert room.member_requests(spec) == {
        "pods": Decimal(1),
        "cpu": Decimal(4),
        GPU: Decimal(2),
        "memory": Decimal(2**30 + 100 * 2**20),
    }


def test_a_resource_the_node_lacks_fits_no_member() -> None:
    built = ready_node("n1", LABELS, gpus=0)
    (only,) = room.rooms([built], [], MEMBER | {"tolerations": [{"operator": "Exists"}]})
    assert only.members_fit(room.member_requests(MEMBER)) == 0


MALFORMED = [
    (
        "label-value-an-integer",
        lambda node, pods: node["metadata"]["labels"].update({"rack": 3}),
        r"metadata.labels\['rack'\] is int",
    ),
    ("labels-a-list", lambda node, pods: node["metadata"].update({"labels": ["rack=r1"]}), "metadata.labels is a list"),
    (
        "conditions-a-string",
        lambda node, pods: node["status"].update({"conditions": "Ready"}),
        "status.conditions is a string",
    ),
    (
        "allocatable-not-a-quantity",
        lambda node, pods: node["status"]["allocatable"].update({GPU: "four"}),
        "'four' is not a quantity",
    ),
    (
        "pod-request-not-a-quantity",
        lambda node, pods: pods.append(
            filler("x", "n1", 1)
            | {"spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}
        ),
        "'lots' is not a quantity",
    ),
]


@pytest.mark.parametrize(("spoil", "said"), [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED])
def test_an_answer_that_cannot_be_read_is_named(spoil: Any, said: str) -> None:
    built, pods = ready_node("n1", LABELS), []
    spoil(built, pods)
    with pytest.raises(MalformedObject, match=said):
        room.rooms([built], pods, MEMBER)

"""The pure verdicts of ``hooks.cluster_fit`` on hand-built Kueue queues and nodes (wire format)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.hooks import cluster_fit
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode

ZONE = "topology.kubernetes.io/zone"


def spec(**overrides: Any) -> GangSpec:
    template = {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}}
    values: dict[str, Any] = {
        "name": "g",
        "namespace": "default",
        "size": 2,
        "pod_template": template,
        "mode": ReservationMode.KUEUE,
        "queue": "team",
        "resources": MemberResources(gpus=1),
    }
    return GangSpec(**{**values, **overrides})


def active(status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "Active", "status": status, "reason": reason, "message": message}]}}


def cluster_queue(*groups: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "cq"},
        "spec": {"resourceGroups": [{"coveredResources": group} for group in groups]},
        **extra,
    }


def test_requested_resources_are_every_nonzero_request_or_limit_of_every_container_once() -> None:
    template = {
        "spec": {
            "initContainers": [{"name": "fetch", "image": "x", "resources": {"limits": {"ephemeral-storage": "1Gi"}}}],
            "containers": [
                {"name": "main", "image": "x", "resources": {"requests": {"cpu": "1", "example.com/fpga": "0"}}},
                {"name": "side", "image": "x", "resources": {"limits": {"memory": "1Gi", "cpu": "1"}}},
            ],
        }
    }
    assert cluster_fit.requested_resources(spec(pod_template=template, resources=MemberResources(gpus=2))) == [
        "ephemeral-storage",
        "cpu",
        "nvidia.com/gpu",
        "memory",
    ]  # a zero request needs no quota
    assert cluster_fit.requested_resources(spec(resources=MemberResources())) == []


@pytest.mark.parametrize(
    ("local_queue", "expected"),
    [
        pytest.param({"metadata": {"name": "team"}, "spec": {"clusterQueue": "cq"}}, None, id="not-reported-yet"),
        pytest.param(
            {"metadata": {"name": "team"}, "spec": {"clusterQueue": "cq"}, **active("True", "Ready")}, None, id="active"
        ),
        pytest.param(
            {
                "metadata": {"name": "team"},
                "spec": {"clusterQueue": "cq"},
                **active("False", "ClusterQueueDoesNotExist", "Can't submit"),
            },
            "LocalQueue default/team cannot admit workloads from ClusterQueue 'cq': LocalQueue Active=False, "
            "ClusterQueueDoesNotExist: Can't submit; create ClusterQueue 'cq' or set kueue_queue to another "
            "LocalQueue",
            id="cluster-queue-missing",
        ),
        pytest.param(
            {"metadata": {"name": "team"}, "spec": {"clusterQueue": "cq"}, **active("False", "ClusterQueueIsInactive")},
            "LocalQueue default/team cannot admit workloads from ClusterQueue 'cq': LocalQueue Active=False, "
            "ClusterQueueIsInactive; see `kubectl describe clusterqueue cq` or set kueue_queue to another "
            "LocalQueue",
            id="cluster-queue-inactive",
        ),
        pytest.param(
            {"metadata": {"name": "team"}, "spec": {}},
            "LocalQueue default/team names no ClusterQueue (spec.clusterQueue); recreate it with one",
            id="no-cluster-queue-named",
        ),
    ],
)
def test_local_queue_refusal(local_queue: dict[str, Any], expected: str | None) -> None:
    assert cluster_fit.local_queue_refusal(local_queue, "default") == expected


@pytest.mark.parametrize(
    ("queue", "refused_with"),
    [
        pytest.param(None, "ClusterQueue 'cq': it does not exist (ClusterQueueDoesNotExist)", id="missing"),
        pytest.param(cluster_queue(["cpu"], ["nvidia.com/gpu"]), None, id="gpu-in-a-second-group"),
        pytest.param(
            cluster_queue(["cpu", "memory"]),
            "has no flavor with nvidia.com/gpu: its resourceGroups cover only cpu, memory;",
            id="no-gpu",
        ),
        pytest.param(
            cluster_queue(), "has no flavor with cpu, nvidia.com/gpu: its resourceGroups cover nothing;", id="no-groups"
        ),
        pytest.param(
            cluster_queue(["cpu", "nvidia.com/gpu"], **active("False", "FlavorNotFound", "missing l4")),
            "ClusterQueue Active=False, FlavorNotFound: missing l4;",
            id="inactive",
        ),
    ],
)
def test_cluster_queue_refusal(queue: dict[str, Any] | None, refused_with: str | None) -> None:
    refusal = cluster_fit.cluster_queue_refusal(queue, "default/team", "cq", ["cpu", "nvidia.com/gpu"])
    if refused_with is None:
        assert refusal is None
    else:
        assert refusal is not None and refused_with in refusal, refusal


def test_missing_local_queue_names_those_there_or_says_there_are_none() -> None:
    assert cluster_fit.missing_local_queue("x", "ml", ["b", "a"]) == (
        "LocalQueue 'x' does not exist in namespace 'ml' (LocalQueues there: a, b); create it or set kueue_queue "
        "to one of them"
    )
    assert "(there is no LocalQueue there); create it" in cluster_fit.missing_local_queue("x", "ml", [])


def node(zone: str | None) -> dict[str, Any]:
    return {"metadata": {"name": "n", "labels": {} if zone is None else {ZONE: zone}}}


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        pytest.param([node("z-a"), node("z-x")], None, id="a-node-there"),
        pytest.param(
            [node("z-b"), node("z-a"), node("z-a"), node(None)],
            "no node in zone z-x yet (nodes are in: z-a, z-b); a node pool that scales from zero may still create one",
            id="elsewhere",
        ),
        pytest.param(
            [node(None)],
            f"no node in zone z-x yet (no node carries {ZONE}); a node pool that scales from zero may still create one",
            id="no-zone-labels",
        ),
    ],
)
def test_zone_warning(nodes: list[dict[str, Any]], expected: str | None) -> None:
    assert cluster_fit.zone_warning("z-x", nodes) == expected

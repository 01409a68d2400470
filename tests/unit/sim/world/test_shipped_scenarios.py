"""The ``kueue`` and ``dws`` scenarios and the scenario ``objects:`` field, through the emulator's API.

A started ``kueue`` cluster has the LocalQueues ``team-a``/``team-b`` and admits a Workload (and
borrows in the cohort); a started ``dws`` cluster provisions a ``queued-provisioning.gke.io``
ProvisioningRequest on its queued pool after the flex-start wait, and its Kueue queue ``dws`` admits a
Workload through the ProvisioningRequest admission check. Objects a scenario lists are validated
against the bundled CRDs when it loads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gang_sim.testing.pytest_plugin import SimCluster
from gang_sim.world.scenario import ScenarioError, load_scenario, parse_scenario

KUEUE = ("kueue.x-k8s.io", "v1beta2")
PROVISIONING = ("autoscaling.x-k8s.io", "v1")
StartCluster = Callable[[str], SimCluster]
"""The ``sim_cluster`` fixture: starts a shipped scenario's cluster on a ManualClock."""
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def condition_statuses(cluster: SimCluster, group_version: tuple[str, str], plural: str, name: str) -> dict[str, str]:
    found = cluster.custom.get_namespaced_custom_object(*group_version, "default", plural, name)
    return {item["type"]: item["status"] for item in (found.get("status") or {}).get("conditions") or []}


def create_workload(cluster: SimCluster, name: str, queue: str, gpus: int) -> None:
    container = {
        "name": "main",
        "image": "trainer",
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
            "limits": {"nvidia.com/gpu": "1"},
        },
    }
    body = {
        "apiVersion": "/".join(KUEUE),
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": gpus,
                    "template": {
                        "spec": {"restartPolicy": "Never", "tolerations": [GPU_TOLERATION], "containers": [container]}
                    },
                }
            ],
        },
    }
    cluster.custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", body)


def test_kueue_scenario_has_two_team_queues_in_one_cohort() -> None:
    objects = load_scenario("kueue").objects
    kinds = [(item["kind"], item["metadata"]["name"]) for item in objects]
    assert kinds == [
        ("ResourceFlavor", "l4"),
        ("ClusterQueue", "team-a"),
        ("ClusterQueue", "team-b"),
        ("LocalQueue", "team-a"),
        ("LocalQueue", "team-b"),
    ]
    cohorts = {item["spec"].get("cohortName") for item in objects if item["kind"] == "ClusterQueue"}
    assert cohorts == {"research"}


def test_kueue_scenario_queues_exist_and_admit_a_workload_borrowing_in_the_cohort(sim_cluster: StartCluster) -> None:
    cluster = sim_cluster("kueue")
    queues = cluster.custom.list_namespaced_custom_object(*KUEUE, "default", "localqueues")["items"]
    assert sorted((item["metadata"]["name"], item["spec"]["clusterQueue"]) for item in queues) == [
        ("team-a", "team-a"),
        ("team-b", "team-b"),
    ]
    create_workload(cluster, "small", "team-a", 2)
    create_workload(cluster, "borrowing", "team-b", 6)  # team-b's 4 GPUs plus 2 borrowed from team-a
    cluster.advance(5)
    assert condition_statuses(cluster, KUEUE, "workloads", "small").get("Admitted") == "True"
    assert condition_statuses(cluster, KUEUE, "workloads", "borrowing").get("Admitted") == "True"
    create_workload(cluster, "over", "team-a", 1)  # the cohort's 8 GPUs are all in use
    cluster.advance(5)
    assert condition_statuses(cluster, KUEUE, "workloads", "over").get("QuotaReserved") != "True"


def test_dws_scenario_provisions_a_queued_request_after_the_flex_start_wait(sim_cluster: StartCluster) -> None:
    cluster = sim_cluster("dws")
    spec = {
        "restartPolicy": "Never",
        "tolerations": [GPU_TOLERATION],
        "containers": [
            {
                "name": "main",
                "image": "t",
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}},
            }
        ],
    }
    cluster.core.create_namespaced_pod_template("default", {"metadata": {"name": "worker"}, "template": {"spec": spec}})
    cluster.custom.create_namespaced_custom_object(
        *PROVISIONING,
        "default",
        "provisioningrequests",
        {
            "apiVersion": "/".join(PROVISIONING),
            "kind": "ProvisioningRequest",
            "metadata": {"name": "gang"},
            "spec": {
                "provisioningClassName": "queued-provisioning.gke.io",
                "parameters": {"maxRunDurationSeconds": "3600"},
                "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 2}],
            },
        },
    )
    cluster.advance(60)
    assert condition_statuses(cluster, PROVISIONING, "provisioningrequests", "gang") == {"Accepted": "True"}  # queued
    cluster.advance(300)  # the 120 s queue, then the pool's 90 s node start
    conditions = condition_statuses(cluster, PROVISIONING, "provisioningrequests", "gang")
    assert conditions["Provisioned"] == "True"
    nodes = cluster.core.list_node(label_selector="cloud.google.com/gke-nodepool=dws-l4").items
    assert len(nodes) == 2 and all(node.metadata.labels["cloud.google.com/gke-queued"] == "true" for node in nodes)
    cluster.advance(3600)
    assert condition_statuses(cluster, PROVISIONING, "provisioningrequests", "gang").get("CapacityRevoked") == "True"


def test_dws_scenario_kueue_queue_admits_through_the_provisioning_request_check(sim_cluster: StartCluster) -> None:
    cluster = sim_cluster("dws")
    create_workload(cluster, "gang", "dws", 4)
    cluster.advance(30)
    assert condition_statuses(cluster, KUEUE, "workloads", "gang").get("Admitted") != "True"
    (request,) = cluster.custom.list_namespaced_custom_object(*PROVISIONING, "default", "provisioningrequests")["items"]
    assert request["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert request["spec"]["parameters"]["maxRunDurationSeconds"] == "3600"
    cluster.advance(300)
    assert condition_statuses(cluster, KUEUE, "workloads", "gang").get("Admitted") == "True"


def _document(objects: list[Any]) -> dict[str, Any]:
    return {"nodePools": [{"name": "cpu", "zone": "z"}], "objects": objects}


@pytest.mark.parametrize(
    ("objects", "field", "message"),
    [
        pytest.param(["ResourceFlavor"], "objects[0]", "must be a mapping", id="not-a-mapping"),
        pytest.param(
            [{"kind": "LocalQueue", "metadata": {"name": "q"}}],
            "objects[0].apiVersion",
            "required",
            id="no-api-version",
        ),
        pytest.param(
            [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Queue", "metadata": {"name": "q"}}],
            "objects[0].kind",
            "serves no kind 'Queue'",
            id="kind-not-served",
        ),
        pytest.param(
            [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "q"},
                    "spec": {"clusterQueue": 5},
                }
            ],
            "objects[0]",
            "must be of type string",
            id="schema-type",
        ),
        pytest.param(
            [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "q"},
                    "spec": {"clusterQueu": "cq"},
                }
            ],
            "objects[0]",
            'unknown field "spec.clusterQueu"',
            id="unknown-field",
        ),
        pytest.param(
            [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "q", "namespace": "ml"},
                    "spec": {"clusterQueue": "cq"},
                }
            ],
            "objects[0]",
            'namespaces "ml" not found',
            id="namespace-missing",
        ),
    ],
)
def test_scenario_objects_are_validated_against_the_bundled_crds(objects: list[Any], field: str, message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(_document(objects))
    assert raised.value.field == field and message in raised.value.message


def test_a_namespace_listed_first_may_hold_later_objects() -> None:
    scenario = parse_scenario(
        _document(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "q", "namespace": "ml"},
                    "spec": {"clusterQueue": "cq"},
                },
            ]
        )
    )
    assert [item["kind"] for item in scenario.objects] == ["Namespace", "LocalQueue"]

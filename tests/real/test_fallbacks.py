"""The fallback ladder's placement steps on the real control plane: each step moves the next try to
capacity the real cluster-autoscaler grows and the real kube-scheduler binds to.

The scenario (``scenarios/gpu.yaml``) has, besides the gpu pool of zone us-central1-a, a second
zone's pool (gpu-b, two nodes), GKE specific reservation l4-reservation's pool (two nodes, labelled
``cloud.google.com/reservation-name``) and one idle Spot node (``cloud.google.com/gke-spot=true``).
A try that must fail asks for more than its pool can ever hold: the autoscaler answers its
best-effort-atomic request ``Provisioned=False/CapacityIsNotFound`` and retries, so the try ends at
its reservation timeout; a check-capacity request with ``noRetry`` is answered ``Failed`` at once.
Where each member ran is read from the nodes its pods were bound to.

Upstream: sigs.k8s.io/cluster-autoscaler ``pkg/provisioningrequest/besteffortatomic`` and
``checkcapacity`` (``noRetry``); the placement labels are GKE's
(https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms,
https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import (
    LeaveReservation,
    OnDemand,
    OtherProvisioningClass,
    OtherZone,
    UseReservation,
)
from airflow_provider_gang.reservation.manifests.pods import RESERVATION_LABEL, ZONE_LABEL
from gang_sim.world.cloud import POOL_LABEL
from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod, summary_of, task_instance
from tests.real.backends import RealBackend, wait_for
from tests.real.members import nothing_left
from tests.real.recording import recording

pytestmark = pytest.mark.timeout(600)
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
ZONE_A, ZONE_B = "us-central1-a", "us-central1-b"
RESERVATION = "l4-reservation"
SPOT_LABEL = "cloud.google.com/gke-spot"
FAILING_TRY = {"deadline", "capacity_not_found"}
"""How a try whose best-effort-atomic request cannot be met ends: at its reservation timeout, the
autoscaler having answered ``Provisioned=False/CapacityIsNotFound``."""
RESERVATION_WINDOW = timedelta(seconds=25)
"""The reservation timeout of a ladder whose first try must time out: the second try's request is
``Provisioned`` one or two autoscaler loops (2 s each) after it is made, well within it."""


def ladder_dag(dag_id: str, **arguments: Any) -> Any:
    """A two-try gang of 1-GPU members, best-effort-atomic, its first try ``arguments`` as given."""
    options: dict[str, Any] = {
        "retries": 1,
        "gpus": 1,
        "cpu": "1",
        "pod_template": simulated_pod(3),
        "provisioning_class": ATOMIC,
        "deferrable": True,
        "reservation_timeout": RESERVATION_WINDOW,
        "startup_timeout": timedelta(minutes=2),
    }
    return gang_dag(dag_id, **(options | arguments))


def run_placed(cluster: RealBackend, dag: Any) -> tuple[Any, dict[str, list[dict[str, str]]]]:
    """``dag.test()`` of ``dag``, after which nothing of its gangs is left; the run and, per gang, the
    labels of the node each member was bound to (the nodes stay: the scenario keeps them for an hour)."""
    with recording(str(cluster.cluster.kubeconfig_path), "v1/pods") as seen:
        dag_run = run_dag_test(dag)
    nothing_left(cluster, dag.dag_id)
    nodes = {node["metadata"]["name"]: node["metadata"]["labels"] for node in cluster.objects("v1/nodes", "")}
    bound: dict[str, dict[str, str]] = {}
    for pod in seen["v1/pods"].named(""):
        labels = pod["metadata"].get("labels") or {}
        if labels.get(naming.ROLE_LABEL) == "member" and pod["spec"].get("nodeName"):
            bound[pod["metadata"]["name"]] = {
                naming.GANG_LABEL: labels[naming.GANG_LABEL],
                "node": pod["spec"]["nodeName"],
            }
    placed: dict[str, list[dict[str, str]]] = {}
    for member in bound.values():
        placed.setdefault(member[naming.GANG_LABEL], []).append(nodes[member["node"]])
    return dag_run, placed


def steps(dag_run: Any) -> list[tuple[str, str]]:
    return [(item["step"], item["outcome"]) for item in summary_of(dag_run)["tries"]]


def second_try(dag_run: Any, placed: dict[str, list[dict[str, str]]], size: int) -> list[dict[str, str]]:
    """The labels of the nodes of the last try's members, once the task succeeded and each of its
    ``size`` members was bound; no earlier try bound a member."""
    assert task_instance(dag_run).state == "success"
    tries = summary_of(dag_run)["tries"]
    last = tries[-1]["gang"]
    assert set(placed) <= {last}, f"an earlier try's members were bound: {sorted(placed)}"
    assert len(placed.get(last, [])) == size, placed
    return placed[last]


def zone_nodes(cluster: RealBackend, zone: str) -> list[str]:
    return [
        node["metadata"]["name"]
        for node in cluster.objects("v1/nodes", "")
        if node["metadata"]["labels"].get(ZONE_LABEL) == zone
    ]


def test_other_provisioning_class_grows_what_check_capacity_did_not_find(cluster: RealBackend) -> None:
    """check-capacity with ``noRetry`` in zone b, whose pool has no node yet: ``Failed`` at once; the
    next try asks best-effort-atomic, and the autoscaler adds zone b's two nodes."""
    assert zone_nodes(cluster, ZONE_B) == [], "zone b's pool must start empty: only this test grows it"
    dag = ladder_dag(
        "real_other_class",
        size=2,
        zone=ZONE_B,
        strict_zone=True,
        provisioning_class=CHECK_CAPACITY,
        provisioning_parameters={"noRetry": "true"},
        fallbacks=[OtherProvisioningClass(ATOMIC)],
        reservation_timeout=timedelta(minutes=2),
    )
    dag_run, placed = run_placed(cluster, dag)
    assert steps(dag_run) == [
        ("as configured", "capacity_not_found"),
        (f"other provisioning class {ATOMIC}", "all_succeeded"),
    ]
    assert {labels[POOL_LABEL] for labels in second_try(dag_run, placed, 2)} == {"gpu-b"}


def test_other_zone_moves_the_gang_to_the_zone_with_room(cluster: RealBackend) -> None:
    """Zone b's pool holds at most two nodes: a gang of three strictly there is never provisioned; the
    next try, strictly in zone a, is."""
    dag = ladder_dag("real_other_zone", size=3, zone=ZONE_B, strict_zone=True, fallbacks=[OtherZone(ZONE_A)])
    dag_run, placed = run_placed(cluster, dag)
    (first, first_outcome), second = steps(dag_run)
    assert first == "as configured" and first_outcome in FAILING_TRY
    assert second == (f"other zone {ZONE_A}", "all_succeeded")
    assert summary_of(dag_run)["zone"] == ZONE_A
    assert {labels[ZONE_LABEL] for labels in second_try(dag_run, placed, 3)} == {ZONE_A}


def test_on_demand_leaves_spot_and_never_lands_on_the_idle_spot_node(cluster: RealBackend) -> None:
    """One Spot node, idle: a Spot gang of two is never provisioned. ``OnDemand`` moves the next try to
    on-demand nodes, which its members require (``cloud.google.com/gke-spot NotIn [true]``) although the
    Spot node would fit one of them."""
    spot_nodes = [labels for labels in node_labels(cluster) if labels.get(SPOT_LABEL) == "true"]
    assert len(spot_nodes) == 1, spot_nodes
    dag_run, placed = run_placed(cluster, ladder_dag("real_on_demand", size=2, spot=True, fallbacks=[OnDemand()]))
    (first, first_outcome), second = steps(dag_run)
    assert first == "as configured" and first_outcome in FAILING_TRY
    assert second == ("spot to on-demand", "all_succeeded")
    assert [labels.get(SPOT_LABEL) for labels in second_try(dag_run, placed, 2)] == [None, None]


def test_use_reservation_runs_the_gang_on_the_reservation(cluster: RealBackend) -> None:
    dag = ladder_dag("real_use_reservation", size=2, use_reservation=RESERVATION, retries=0)
    dag_run, placed = run_placed(cluster, dag)
    assert steps(dag_run) == [("as configured", "all_succeeded")]
    assert summary_of(dag_run)["reservation_name"] == RESERVATION
    nodes = second_try(dag_run, placed, 2)
    assert [labels.get(RESERVATION_LABEL) for labels in nodes] == [RESERVATION, RESERVATION]


def test_a_node_of_the_reservation_takes_a_pod_that_does_not_select_it(cluster: RealBackend) -> None:
    """A reservation is no scheduling filter: a pod asking for the reservation's pool by its node-pool
    label alone is bound to a reservation node, which the autoscaler adds if none is idle (``gang-sim``
    refused such pods there until it was brought in line, ``gang_sim.controllers.fit``)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "not-selecting-the-reservation", "namespace": "default"},
        "spec": {
            "nodeSelector": {POOL_LABEL: "gpu-reserved"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "other:sim", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }
    name = cluster.create("v1/pods", pod)["metadata"]["name"]

    def bound_node() -> str | None:
        (current,) = [item for item in cluster.objects("v1/pods") if item["metadata"]["name"] == name]
        return current["spec"].get("nodeName")

    try:
        node = wait_for(bound_node, timeout=180, what=f"{name} bound")
        labels = {item["metadata"]["name"]: item["metadata"]["labels"] for item in cluster.objects("v1/nodes", "")}
        assert labels[node].get(RESERVATION_LABEL) == RESERVATION, labels[node]
    finally:
        cluster.cluster.kubectl("delete", "pod", name, "-n", "default", "--grace-period=0", "--force")


def test_the_use_reservation_step_leaves_spot_for_the_reservation(cluster: RealBackend) -> None:
    dag = ladder_dag("real_use_reservation_step", size=2, spot=True, fallbacks=[UseReservation(RESERVATION)])
    dag_run, placed = run_placed(cluster, dag)
    (first, first_outcome), second = steps(dag_run)
    assert first == "as configured" and first_outcome in FAILING_TRY
    assert second == (f"use reservation {RESERVATION}", "all_succeeded")
    nodes = second_try(dag_run, placed, 2)
    assert [labels.get(RESERVATION_LABEL) for labels in nodes] == [RESERVATION, RESERVATION]
    assert [labels.get(SPOT_LABEL) for labels in nodes] == [None, None]


def test_leave_reservation_runs_the_gang_on_demand_when_the_reservation_is_too_small(cluster: RealBackend) -> None:
    """The reservation is two nodes: a gang of three that requires it is never provisioned; the next try
    requires no reservation and runs on on-demand nodes (which may include the reservation's: a node
    of a specific reservation takes any pod that fits, as every node does)."""
    dag = ladder_dag("real_leave_reservation", size=3, use_reservation=RESERVATION, fallbacks=[LeaveReservation()])
    dag_run, placed = run_placed(cluster, dag)
    (first, first_outcome), second = steps(dag_run)
    assert first == "as configured" and first_outcome in FAILING_TRY
    assert second == ("leave the reservation for on-demand", "all_succeeded")
    assert summary_of(dag_run)["reservation_name"] is None
    assert [labels.get(SPOT_LABEL) for labels in second_try(dag_run, placed, 3)] == [None, None, None]


def node_labels(cluster: RealBackend) -> list[dict[str, str]]:
    return [node["metadata"]["labels"] for node in cluster.objects("v1/nodes", "")]

"""The fault paths of a topology gang's cluster reads, each injected from outside the provider and each
ending the try with a recorded reason and nothing of the gang left: the node list failing past the
client's retries (``/_sim/faults``), a domain filling between its choice and the bind (another team's
pod created in it while the reservation waits), a node whose labels cannot be read (written into the
emulator's store as no API server would accept it), a required topology no node carries.

Driven step by step (``tests.e2e.driving``) on the one-rack cluster of ``bench.topology_cluster``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangTryFailed
from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation.phases import Reason
from bench.topology_cluster import RACK, filler, one_rack_document, write
from demo.cluster import CONN_ID
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import gang_objects, simulated_pod
from tests.e2e.topology_watch import Bindings

QUICK_CLIENT = {"retry_attempts": 2, "retry_base_delay": 0.05, "retry_max_delay": 0.1, "request_timeout": 10.0}


@pytest.fixture
def cluster(tmp_path: Path, cluster_factory: Any) -> ClusterHarness:
    harness: ClusterHarness = cluster_factory(
        str(write(tmp_path / "one-rack.yaml", one_rack_document())), time_scale=60
    )
    return harness


def gates_gang(size: int = 4, label: str = RACK) -> GangTrainingOperator:
    return GangTrainingOperator(
        task_id="train",
        size=size,
        gpus=1,
        cpu="1",
        pod_template=simulated_pod(20),
        reservation="gates",
        required_topology=label,
        deferrable=True,
        kubernetes_conn_id=CONN_ID,
        client_options=QUICK_CLIENT,
    )


def outcomes(context: dict[str, Any]) -> list[tuple[int, str]]:
    return [(record.attempt, record.outcome) for record in TryHistory(context).finished()]


def test_the_node_list_failing_past_its_retries_ends_the_try_before_anything_is_created(
    cluster: ClusterHarness,
) -> None:
    context = context_for(FakeTaskInstance("topology_nodes_fail", "run-1"))
    cluster.emulator.faults = Faults.parse("list/nodes:1.0:503")
    try:
        with pytest.raises(GangTryFailed) as failed:
            gates_gang().execute(context)
    finally:
        cluster.emulator.faults = Faults()
    assert failed.value.reason is Reason.CLUSTER_UNREACHABLE
    assert outcomes(context) == [(1, "cluster_unreachable")]
    assert gang_objects(cluster) == {}


def test_a_domain_filling_between_choice_and_bind_ends_the_try_with_no_member_bound(cluster: ClusterHarness) -> None:
    bindings = Bindings(cluster)
    op = gates_gang()
    context = context_for(FakeTaskInstance("topology_domain_full", "run-1"))
    reservation = deferred(op.execute, context)
    event = first_event(reservation)
    assert event["status"] == "success", event
    late = cluster.create("v1/pods", filler("late-team", "rack-y1", 2), "default")
    eventually(
        lambda: any(
            pod["metadata"]["name"] == "late-team" and pod["spec"].get("nodeName") for pod in cluster.objects("v1/pods")
        ),
        timeout=30.0,
        what="the other team's pod bound in rack-y1",
    )
    with pytest.raises(GangTryFailed) as failed:
        op.execute_reserved(context, event)
    assert failed.value.reason is Reason.TOPOLOGY_DOMAIN_FULL
    assert "rack rack-y1 now has room for 2 of the 4 members" in str(failed.value)
    assert outcomes(context) == [(1, "topology_domain_full")]
    assert bindings.of(reservation.gang_name) == {}
    eventually(lambda: gang_objects(cluster) == {}, timeout=30.0, what="nothing of the gang left")
    assert late["metadata"]["name"] == "late-team"


def test_a_node_whose_labels_cannot_be_read_ends_the_try_malformed(cluster: ClusterHarness) -> None:
    store = cluster.store

    def spoil() -> None:
        nodes = store.registry.lookup("v1", "nodes")
        assert nodes is not None
        stored = next(iter(store.view("v1/nodes", None)))
        spoiled = copy.deepcopy(stored)
        spoiled["metadata"]["labels"]["example.com/rack-number"] = 7  # no API server stores a label so
        store.table.commit(nodes, "MODIFIED", spoiled, stored)

    cluster.run(spoil)
    context = context_for(FakeTaskInstance("topology_malformed", "run-1"))
    with pytest.raises(GangTryFailed) as failed:
        gates_gang().execute(context)
    assert failed.value.reason is Reason.MALFORMED_ANSWER
    assert "metadata.labels['example.com/rack-number'] is int, not a string" in str(failed.value)
    assert outcomes(context) == [(1, "malformed_answer")]
    assert gang_objects(cluster) == {}


def test_a_required_topology_no_node_carries_is_refused_before_anything_is_created(cluster: ClusterHarness) -> None:
    context = context_for(FakeTaskInstance("topology_no_domain", "run-1"))
    with pytest.raises(GangTryFailed) as failed:
        gates_gang(label="example.com/row").execute(context)
    assert failed.value.reason is Reason.NO_TOPOLOGY_DOMAIN
    assert outcomes(context) == [(1, "no_topology_domain")]
    assert gang_objects(cluster) == {}

"""The fault paths of a topology gang's cluster reads, each injected from outside the provider and each
ending the try with a recorded reason and nothing of the gang left: every new read failing past the
client's retries (``/_sim/faults``, the request log ``/_sim/requests`` showing the read answered so) -
the node list and the pods of every namespace before anything is created, the node list again when
the ranks are placed at launch in every mode, the Kueue precheck's flavors and Topologies, the
Workload API's dry run, and the node list read for the record once the gang ran; a domain filling
between its choice and the bind (another team's pod created in it while the reservation waits); a
node whose labels cannot be read (written into the emulator's store as no API server would accept
it); a required topology no node carries.

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
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import gang_objects, simulated_pod
from tests.e2e.topology_watch import Bindings
from tests.reliability.emulator_side import Control, call_target

QUICK_CLIENT = {"retry_attempts": 2, "retry_base_delay": 0.05, "retry_max_delay": 0.1, "request_timeout": 10.0}


@pytest.fixture
def cluster(tmp_path: Path, cluster_factory: Any) -> ClusterHarness:
    harness: ClusterHarness = cluster_factory(
        str(write(tmp_path / "one-rack.yaml", one_rack_document())), time_scale=60
    )
    return harness


MODES: dict[str, dict[str, Any]] = {
    "gates": {"reservation": "gates"},
    "provisioning_request": {"reservation": "provisioning_request"},
    "kueue": {"reservation": "kueue", "kueue_queue": "tas"},
    "workload": {"reservation": "workload"},
}


def gates_gang(size: int = 4, label: str = RACK, mode: str = "gates", seconds: int = 20) -> GangTrainingOperator:
    return GangTrainingOperator(
        task_id="train",
        size=size,
        gpus=1,
        cpu="1",
        pod_template=simulated_pod(seconds),
        required_topology=label,
        deferrable=True,
        kubernetes_conn_id=CONN_ID,
        client_options=QUICK_CLIENT,
        **MODES[mode],
    )


ATTEMPTS = QUICK_CLIENT["retry_attempts"]


def fail_reads(control: Control, target: str) -> None:
    """Answer the next ``target`` requests (``list/nodes``) 503, as many as one read's attempts: the
    read that comes first fails past its retries, and nothing after it is hit."""
    control.requests(clear=True)
    control.set_faults(f"{target}:1.0:503:count:{ATTEMPTS}")


def failed_reads(control: Control, target: str) -> list[str | None]:
    """The namespace (``None``: cluster-scoped or every namespace) of each ``target`` request answered 503."""
    return [entry["namespace"] for entry in control.requests() if call_target(entry) == target and entry["code"] == 503]


def outcomes(context: dict[str, Any]) -> list[tuple[int, str]]:
    return [(record.attempt, record.outcome) for record in TryHistory(context).finished()]


@pytest.mark.parametrize(
    ("mode", "read"),
    [
        ("gates", "list/nodes"),
        ("gates", "list/pods"),
        ("provisioning_request", "list/nodes"),
        ("kueue", "get/kueue.x-k8s.io/resourceflavors"),
        ("kueue", "get/kueue.x-k8s.io/topologies"),
        ("workload", "create/scheduling.k8s.io/podgroups"),
    ],
)
def test_a_read_before_anything_is_created_failing_past_its_retries_ends_the_try_with_nothing_created(
    cluster: ClusterHarness, mode: str, read: str
) -> None:
    """The room (nodes, the pods of every namespace) of a gang the provider places; the Kueue queue's
    flavors and Topology; the Workload API's dry-run PodGroup."""
    control = Control(cluster)
    context = context_for(FakeTaskInstance(f"topology_read_fails_{mode}_{read.split('/')[-1]}", "run-1"))
    fail_reads(control, read)
    try:
        with pytest.raises(GangTryFailed) as failed:
            gates_gang(mode=mode).execute(context)
    finally:
        control.clear_faults()
    assert failed.value.reason is Reason.CLUSTER_UNREACHABLE
    namespace = "default" if "podgroups" in read else None  # list/pods: the pods of every namespace
    assert failed_reads(control, read) == [namespace] * ATTEMPTS
    assert outcomes(context) == [(1, "cluster_unreachable")]
    assert gang_objects(cluster) == {}
    assert cluster.objects("batch/v1/jobs") == [] and cluster.objects("scheduling.k8s.io/v1beta1/podgroups") == []


@pytest.mark.parametrize("mode", list(MODES))
def test_the_node_list_failing_past_its_retries_at_launch_ends_the_try_with_nothing_left(
    cluster: ClusterHarness, mode: str
) -> None:
    """Granted, then the ranks' places cannot be read (the room again where the provider places them;
    the nodes of Kueue's assignment or of the bound members): no gate is released, no member created."""
    bindings, control = Bindings(cluster), Control(cluster)
    op = gates_gang(mode=mode)
    context = context_for(FakeTaskInstance(f"topology_launch_nodes_fail_{mode}", "run-1"))
    reservation = deferred(op.execute, context)
    event = first_event(reservation)
    assert event["status"] == "success", event
    bound_when_granted = dict(bindings.of(reservation.gang_name))
    fail_reads(control, "list/nodes")
    try:
        with pytest.raises(GangTryFailed) as failed:
            op.execute_reserved(context, event)
    finally:
        control.clear_faults()
    assert failed.value.reason is Reason.CLUSTER_UNREACHABLE
    assert failed_reads(control, "list/nodes") == [None] * ATTEMPTS
    assert outcomes(context) == [(1, "cluster_unreachable")]
    if mode in ("gates", "provisioning_request"):  # the provider's own release or creation never came
        assert bound_when_granted == {} and bindings.of(reservation.gang_name) == {}
    eventually(lambda: gang_objects(cluster) == {}, timeout=30.0, what="nothing of the gang left")


def test_the_node_list_failing_when_the_try_is_recorded_keeps_the_outcome_without_the_domains(
    cluster: ClusterHarness,
) -> None:
    """Where the ranks ran is read once the gang has run; a read failing past its retries leaves the
    record without the domains, never without the record."""
    control = Control(cluster)
    op = gates_gang(seconds=1)
    context = context_for(FakeTaskInstance("topology_record_nodes_fail", "run-1"))
    run = deferred(op.execute_reserved, context, first_event(deferred(op.execute, context)))
    event = first_event(run)
    fail_reads(control, "list/nodes")
    try:
        op.execute_finished(context, event)
    finally:
        control.clear_faults()
    assert failed_reads(control, "list/nodes") == [None] * ATTEMPTS
    (record,) = TryHistory(context).finished()
    assert (record.outcome, record.required_topology, len(record.rank_nodes)) == ("all_succeeded", RACK, 4)
    assert record.rank_domains == {}
    assert gang_objects(cluster) == {}


@pytest.mark.parametrize("mode", ["gates", "provisioning_request"])
def test_a_domain_filling_between_choice_and_bind_ends_the_try_with_no_member_bound(
    cluster: ClusterHarness, mode: str
) -> None:
    bindings = Bindings(cluster)
    op = gates_gang(mode=mode)
    context = context_for(FakeTaskInstance(f"topology_domain_full_{mode}", "run-1"))
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

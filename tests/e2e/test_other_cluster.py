"""``OtherCluster``: a gang fails over to a second cluster, on two ``gang-sim`` instances (``tests.e2e.two_clusters``).

Cluster A (``kubernetes_default``) has no GPU node and cannot get one, so a check-capacity request
with ``noRetry`` ends ``capacity_not_found`` at once; cluster B (``gang_cluster_b``) has four idle
1-GPU nodes. Faults come from outside the provider: the emulators' fault injection and a worker
process killed by a store callback of cluster B.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangTryFailed
from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import OtherCluster
from demo.cluster import CONN_ID
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.child_processes import REPOSITORY, child_environment
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance
from tests.e2e.test_kill_and_adopt import gang_objects, on_kill_with_state, running_pods
from tests.e2e.two_clusters import ARGUMENTS, B_CONN, NO_GPUS, two_clusters
from tests.reliability import worker


def failover_operator(*, deferrable: bool, run_seconds: float = 10) -> GangTrainingOperator:
    """The task of the hand-driven tests and of ``tests.e2e.other_cluster_worker``."""
    return GangTrainingOperator(
        task_id="train", retries=2, pod_template=simulated_pod(run_seconds), deferrable=deferrable, **ARGUMENTS
    )


def all_gang_objects(cluster: ClusterHarness) -> list[str]:
    return [
        f"{kind}/{item['metadata']['name']}"
        for kind in ("v1/pods", "v1/configmaps", "v1/podtemplates", "v1/services")
        for item in cluster.objects(kind, label_selector=naming.GANG_LABEL)
    ] + [item["metadata"]["name"] for item in cluster.objects("autoscaling.x-k8s.io/v1/provisioningrequests")]


def request_log(cluster: ClusterHarness) -> list[tuple[str, str]]:
    """``(event, name)`` of every ProvisioningRequest ADDED or DELETED on ``cluster`` from now on."""
    events: list[tuple[str, str]] = []

    def record(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource.endswith("/provisioningrequests") and event_type in ("ADDED", "DELETED"):
            events.append((event_type, obj["metadata"]["name"]))

    cluster.run(lambda: cluster.store.subscribe(record))
    return events


@pytest.mark.timeout(300)
def test_a_stock_out_on_cluster_a_fails_over_to_cluster_b(cluster_factory: Any, run_dag: Any) -> None:
    cluster_a, cluster_b = two_clusters(cluster_factory)
    on_a, on_b = request_log(cluster_a), request_log(cluster_b)
    dag_run = run_dag(
        gang_dag("other_cluster", retries=1, pod_template=simulated_pod(10), deferrable=True, **ARGUMENTS)
    )
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    tries = [(item["step"], item["outcome"], item["kubernetes_conn_id"]) for item in summary["tries"]]
    assert tries == [
        ("as configured", "capacity_not_found", CONN_ID),
        (f"other cluster {B_CONN}", "all_succeeded", B_CONN),
    ]
    first, second = (item["gang"] for item in summary["tries"])
    assert on_a == [("ADDED", first), ("DELETED", first)] and on_b == [("ADDED", second), ("DELETED", second)]
    assert all_gang_objects(cluster_a) == [] and all_gang_objects(cluster_b) == []


@pytest.mark.timeout(300)
def test_cluster_a_down_moves_the_gang_to_cluster_b(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster_a, cluster_b = two_clusters(cluster_factory)
    cluster_a.emulator.faults = Faults.parse("*:1.0:503")
    try:
        dag_run = run_dag(
            gang_dag("cluster_a_down", retries=1, pod_template=simulated_pod(10), deferrable=True, **ARGUMENTS)
        )
    finally:
        cluster_a.emulator.faults = Faults()
    logged = capfd.readouterr()
    assert task_instance(dag_run).state == "success", logged.out[-3000:]
    tries = [(item["outcome"], item["kubernetes_conn_id"]) for item in summary_of(dag_run)["tries"]]
    assert tries == [("cluster_unreachable", CONN_ID), ("all_succeeded", B_CONN)]
    assert f"step 1 (other cluster {B_CONN}) because try 1 ended with cluster_unreachable" in logged.out + logged.err
    assert all_gang_objects(cluster_a) == [] and all_gang_objects(cluster_b) == []


@pytest.mark.timeout(300)
def test_the_other_cluster_unreachable_ends_the_try_there_and_leaves_nothing(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster_a, cluster_b = two_clusters(cluster_factory)
    cluster_b.emulator.faults = Faults.parse("*:1.0:503")
    try:
        dag_run = run_dag(
            gang_dag("cluster_b_down", retries=1, pod_template=simulated_pod(10), deferrable=True, **ARGUMENTS)
        )
    finally:
        cluster_b.emulator.faults = Faults()
    logged = capfd.readouterr()
    text = logged.out + logged.err
    assert task_instance(dag_run).state == "failed"
    assert f"| as configured on {CONN_ID} | provisioning_request | 2 | capacity_not_found" in text
    assert f"| other cluster {B_CONN} on {B_CONN} | provisioning_request | 2 | cluster_unreachable" in text
    assert all_gang_objects(cluster_a) == [] and all_gang_objects(cluster_b) == []


@pytest.mark.timeout(300)
def test_an_unknown_connection_is_refused_naming_the_step(cluster_factory: Any, run_dag: Any) -> None:
    cluster_a = cluster_factory(NO_GPUS, time_scale=60)
    arguments = {**ARGUMENTS, "fallbacks": [OtherCluster("no_such_cluster")]}
    op = GangTrainingOperator(task_id="train", retries=1, pod_template=simulated_pod(10), deferrable=True, **arguments)
    context = context_for(FakeTaskInstance("unknown_conn", "run-1"))
    with pytest.raises(GangTryFailed, match="capacity_not_found"):
        op.execute_reserved(context, first_event(deferred(op.execute, context)))
    second = context_for(FakeTaskInstance("unknown_conn", "run-1", try_number=2))
    with pytest.raises(Exception, match="step 1 \\(other cluster no_such_cluster\\)") as refused:
        op.execute(second)
    assert "add an Airflow connection 'no_such_cluster' of type kubernetes" in str(refused.value)
    assert type(refused.value).__name__ == "GangFailedForGood"
    assert [record.outcome for record in TryHistory(second).finished()] == ["capacity_not_found", "invalid"]
    assert all_gang_objects(cluster_a) == []


@pytest.mark.timeout(300)
def test_a_kill_while_the_gang_runs_on_cluster_b_deletes_it_there(cluster_factory: Any) -> None:
    cluster_a, cluster_b = two_clusters(cluster_factory)
    op = failover_operator(deferrable=True, run_seconds=3600)
    first = context_for(FakeTaskInstance("kill_on_b", "run-1"))
    with pytest.raises(GangTryFailed, match="capacity_not_found"):
        op.execute_reserved(first, first_event(deferred(op.execute, first)))
    second = context_for(FakeTaskInstance("kill_on_b", "run-1", try_number=2))
    reservation = deferred(op.execute, second)
    assert reservation.arguments.kubernetes_conn_id == B_CONN
    run = deferred(op.execute_reserved, second, first_event(reservation))
    assert run.arguments.kubernetes_conn_id == B_CONN
    eventually(lambda: running_pods(cluster_b, run.gang_name) == 2, timeout=30.0, what="both members running on B")
    on_kill_with_state(run, "failed")
    eventually(lambda: gang_objects(cluster_b, run.gang_name) == {}, timeout=30.0, what="the gang deleted on B")
    assert all_gang_objects(cluster_a) == []


@pytest.mark.timeout(300)
def test_a_blocking_kill_on_cluster_b_deletes_the_gang_there(cluster_factory: Any) -> None:
    import threading

    cluster_a, cluster_b = two_clusters(cluster_factory)
    op = failover_operator(deferrable=False, run_seconds=3600)
    with pytest.raises(GangTryFailed, match="capacity_not_found"):
        op.execute(context_for(FakeTaskInstance("blocking_kill_on_b", "run-1")))
    ended: dict[str, BaseException] = {}

    def execute() -> None:
        try:
            op.execute(context_for(FakeTaskInstance("blocking_kill_on_b", "run-1", try_number=2)))
        except BaseException as error:  # the try ends as killed
            ended["error"] = error

    thread = threading.Thread(target=execute)
    thread.start()
    gang = naming.gang_name("blocking_kill_on_b", "train", "run-1", attempt=2)
    eventually(lambda: running_pods(cluster_b, gang) == 2, timeout=30.0, what="both members running on B")
    op.on_kill()
    thread.join(timeout=60)
    assert type(ended.get("error")).__name__ == "AirflowTaskTerminated"
    eventually(lambda: gang_objects(cluster_b, gang) == {}, timeout=30.0, what="the gang deleted on B")
    assert all_gang_objects(cluster_a) == []


@pytest.mark.timeout(300)
def test_a_worker_killed_on_its_way_from_a_to_b_leaves_nothing_duplicated_or_orphaned(
    cluster_factory: Any, tmp_path: Path
) -> None:
    cluster_a, cluster_b = two_clusters(cluster_factory)
    state, dag_id, log = tmp_path / "state.json", "killed_on_the_way", tmp_path / "worker.log"
    created_on_b: collections.Counter[str] = collections.Counter()
    deleted_on_a: list[str] = []

    def on_a(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if event_type == "DELETED" and naming.GANG_LABEL in (obj["metadata"].get("labels") or {}):
            deleted_on_a.append(obj["metadata"]["name"])

    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.other_cluster_worker", str(state), dag_id],
            cwd=REPOSITORY,
            env=child_environment(),
            stdout=output,
            stderr=subprocess.STDOUT,
        )

    def on_b(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if event_type == "ADDED" and naming.GANG_LABEL in (obj["metadata"].get("labels") or {}):
            created_on_b[f"{resource}/{obj['metadata']['name']}"] += 1
            if sum(created_on_b.values()) == 1:  # try 2's first object on B: its owner ConfigMap
                os.kill(process.pid, signal.SIGKILL)

    stop_a = cluster_a.run(lambda: cluster_a.store.subscribe(on_a))
    stop_b = cluster_b.run(lambda: cluster_b.store.subscribe(on_b))
    try:
        code = process.wait(timeout=180)
        assert code == -signal.SIGKILL, f"worker ended with {code}: {log.read_text()[-3000:]}"
        killed_gang = naming.gang_name(dag_id, "train", "run-1", attempt=2)
        assert deleted_on_a and all(
            name.startswith(naming.gang_name(dag_id, "train", "run-1", attempt=1)) for name in deleted_on_a
        )
        third = worker.context(state, dag_id, 3)
        summary = failover_operator(deferrable=False).execute(third)
    finally:
        cluster_a.run(stop_a)
        cluster_b.run(stop_b)
    records = TryHistory(third).finished()
    assert [(record.attempt, record.kubernetes_conn_id) for record in records] == [
        (1, CONN_ID),
        (2, B_CONN),
        (3, B_CONN),
    ]
    assert records[0].outcome == "capacity_not_found" and records[2].outcome == "all_succeeded"
    assert records[1].outcome in ("killed", "worker_lost")
    assert (records[2].adopted_from == 2) == (records[1].outcome == "worker_lost")
    assert summary["size_run"] == 2
    duplicated = [name for name, count in created_on_b.items() if count > 1]
    assert duplicated == [], f"created twice on B: {duplicated}"
    assert any(killed_gang in name for name in created_on_b)
    eventually(
        lambda: all_gang_objects(cluster_a) == [] and all_gang_objects(cluster_b) == [],
        timeout=30.0,
        what="nothing left on either cluster",
    )

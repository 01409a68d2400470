"""Faults of a gang on a Kueue MultiKueue manager, injected from outside the provider
(``tests.e2e.multikueue_clusters``): a member evicted on the worker, kills (deferred, blocking, while
waiting for a worker), the worker's connection reaching nothing, the worker and the manager not
answering. Each ends with a recorded reason and nothing of the gang on any of the three clusters."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.airflow_compat import AirflowTaskTerminated
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangTryFailed
from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import RetryAsIs
from demo.cluster import free_port
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.multikueue_clusters import (
    WORKER_1,
    WORKER_2,
    WORKER_2_CONN,
    arguments,
    launched,
    multikueue_clusters,
    nothing_left,
    running_on_worker,
    watching_pods,
)
from tests.e2e.test_kill_and_adopt import on_kill_with_state


def test_a_member_evicted_on_the_worker_ends_the_try_and_the_next_runs_there(cluster_factory: Any) -> None:
    """A running member is evicted on worker-2 (from outside: its status written as the kubelet's
    eviction writes it): try 1 ends ``member_lost``; try 2, ``RetryAsIs``, runs on worker-2 again."""
    clusters = multikueue_clusters(cluster_factory)
    op = GangTrainingOperator(task_id="train", retries=1, **arguments(fallbacks=[RetryAsIs()]))
    first = context_for(FakeTaskInstance("multikueue_evicted", "run-1", try_number=1))
    run = launched(clusters, op, first)
    worker = clusters.workers[WORKER_2]
    ended: dict[str, Any] = {}
    waiting = threading.Thread(target=lambda: ended.update(event=first_event(run, timeout=60)))
    waiting.start()  # as a triggerer runs it: watching the members when one of them is evicted
    eventually(lambda: watching_pods(worker) or None, timeout=30.0, what="the run trigger watching worker-2's pods")
    pod = worker.objects("v1/pods", label_selector=f"{naming.GANG_LABEL}={run.gang_name}")[0]
    evicted = {"status": {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}}
    worker.run(
        lambda: worker.store.patch(
            "v1/pods", pod["metadata"]["name"], evicted, namespace="default", subresource="status"
        )
    )
    waiting.join(timeout=90)
    event = ended["event"]
    assert (event["status"], event["reason"]) == ("failure", "member_lost"), event
    with pytest.raises(GangTryFailed, match="member_lost"):
        op.execute_finished(first, event)
    second = context_for(FakeTaskInstance("multikueue_evicted", "run-1", try_number=2))
    run = deferred(op.execute_reserved, second, first_event(deferred(op.execute, second)))
    op.execute_finished(second, first_event(run, timeout=60))
    records = TryHistory(second).finished()
    assert [(record.outcome, record.worker_cluster) for record in records] == [
        ("member_lost", WORKER_2),
        ("all_succeeded", WORKER_2),
    ]
    nothing_left(clusters)


def test_a_kill_during_the_run_deletes_the_gang_on_the_manager_and_the_worker(cluster_factory: Any) -> None:
    clusters = multikueue_clusters(cluster_factory)
    op = GangTrainingOperator(task_id="train", **arguments(pod_template=simulated_pod(3600)))
    run = launched(clusters, op, context_for(FakeTaskInstance("multikueue_kill", "run-1")))
    on_kill_with_state(run, "failed")  # the user marked it failed: the run trigger's on_kill
    nothing_left(clusters)


def test_a_blocking_kill_deletes_the_gang_on_both_sides(cluster_factory: Any) -> None:
    clusters = multikueue_clusters(cluster_factory)
    op = GangTrainingOperator(task_id="train", **arguments(pod_template=simulated_pod(3600), deferrable=False))
    outcome: dict[str, BaseException] = {}

    def execute() -> None:
        try:
            op.execute(context_for(FakeTaskInstance("multikueue_kill_blocking", "run-1")))
        except BaseException as error:  # the try ends with the gang gone
            outcome["error"] = error

    worker = threading.Thread(target=execute)
    worker.start()
    gang = naming.gang_name("multikueue_kill_blocking", "train", "run-1", attempt=1)
    eventually(lambda: running_on_worker(clusters, gang) == 2 or None, timeout=30.0, what="members running")
    op.on_kill()
    worker.join(timeout=60)
    assert isinstance(outcome.get("error"), AirflowTaskTerminated)
    nothing_left(clusters)


def test_a_kill_while_waiting_for_a_worker_leaves_nothing(cluster_factory: Any) -> None:
    clusters = multikueue_clusters(cluster_factory)
    op = GangTrainingOperator(task_id="train", **arguments(size=5))  # no worker can admit it
    waiting = deferred(op.execute, context_for(FakeTaskInstance("multikueue_kill_waiting", "run-1")))
    eventually(
        lambda: clusters.workers[WORKER_1].objects("kueue.x-k8s.io/v1beta2/workloads") or None,
        timeout=30.0,
        what="MultiKueue's copies of the Workload on the workers",
    )
    on_kill_with_state(waiting, "failed")
    nothing_left(clusters)


def unreachable_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, cluster: ClusterHarness, tmp: Path) -> None:
    """``conn_id`` as a kubeconfig of ``cluster`` whose server is a port nobody serves."""
    kubeconfig = cluster.kubeconfig_path.read_text().replace(cluster.url, f"https://127.0.0.1:{free_port()}")
    path = tmp / f"{conn_id}.kubeconfig"
    path.write_text(kubeconfig)
    connection = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(path)}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection))


def test_a_worker_connection_failing_at_launch_ends_the_try_and_leaves_nothing(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """worker-2's connection reaches nothing (MultiKueue's own link to it is fine): the try ends
    ``cluster_unreachable``, the manager's Workload is deleted, and MultiKueue removes its copies."""
    clusters = multikueue_clusters(cluster_factory)
    unreachable_connection(monkeypatch, WORKER_2_CONN, clusters.workers[WORKER_2], tmp_path)
    op = GangTrainingOperator(task_id="train", **arguments())
    context = context_for(FakeTaskInstance("multikueue_worker_down", "run-1"))
    event = first_event(deferred(op.execute, context))
    with pytest.raises(GangTryFailed, match="cluster_unreachable"):
        op.execute_reserved(context, event)
    (record,) = TryHistory(context).finished()
    assert (record.outcome, record.worker_cluster, record.worker_kubernetes_conn_id) == (
        "cluster_unreachable",
        WORKER_2,
        WORKER_2_CONN,
    )
    nothing_left(clusters)


def test_a_worker_unreachable_mid_run_ends_the_try_and_leaves_nothing(cluster_factory: Any) -> None:
    """worker-2 stops answering while the members run (MultiKueue loses it too): after
    ``unreachable_timeout`` the try ends ``cluster_unreachable``; once it answers again MultiKueue
    removes its copies of the gang the manager no longer has."""
    clusters = multikueue_clusters(cluster_factory)
    op = GangTrainingOperator(task_id="train", **arguments(pod_template=simulated_pod(3600), unreachable_timeout=3))
    context = context_for(FakeTaskInstance("multikueue_worker_lost", "run-1"))
    run = launched(clusters, op, context)
    worker = clusters.workers[WORKER_2]
    worker.emulator.faults = Faults.parse("*:1.0:503")  # type: ignore[union-attr]
    try:
        event = first_event(run, timeout=60)
        assert (event["status"], event["reason"]) == ("failure", "cluster_unreachable")
        with pytest.raises(GangTryFailed, match="cluster_unreachable"):
            op.execute_finished(context, event)
    finally:
        worker.emulator.faults = Faults()  # type: ignore[union-attr]
    assert [record.outcome for record in TryHistory(context).finished()] == ["cluster_unreachable"]
    nothing_left(clusters)


def test_the_manager_unreachable_while_waiting_ends_the_try_and_leaves_nothing(cluster_factory: Any) -> None:
    clusters = multikueue_clusters(cluster_factory)
    op = GangTrainingOperator(task_id="train", **arguments(size=5, unreachable_timeout=3))
    context = context_for(FakeTaskInstance("multikueue_manager_lost", "run-1"))
    waiting = deferred(op.execute, context)
    clusters.manager.emulator.faults = Faults.parse("*:1.0:drop")  # type: ignore[union-attr]
    try:
        event = first_event(waiting, timeout=60)
    finally:
        clusters.manager.emulator.faults = Faults()  # type: ignore[union-attr]
    assert (event["status"], event["reason"]) == ("failure", "cluster_unreachable")
    with pytest.raises(GangTryFailed, match="cluster_unreachable"):
        op.execute_reserved(context, event)
    assert [record.outcome for record in TryHistory(context).finished()] == ["cluster_unreachable"]
    nothing_left(clusters)

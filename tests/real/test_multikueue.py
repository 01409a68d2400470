"""``kueue`` mode through Kueue's MultiKueue on real control planes: a manager and two workers
(:class:`gang_sim.testing.real.multikueue.RealMultiKueue`, what ``gang-sim real --scenario
multikueue`` runs), real Kueue 0.17 on each, MultiKueue reaching the workers through their kubeconfig
Secrets. ``worker-1`` has no GPU (its ClusterQueue cannot admit a GPU gang), ``worker-2`` four 1-GPU
nodes. The Airflow connections read the one kubeconfig the setup writes, a context each.

Proven here: the Job dispatched to the worker that can admit it and followed there; a worker without
a connection followed through the manager's mirror; the ladder (the deadline when no worker admits,
``ShrinkTo``, ``OtherQueue``, ``RetryAsIs`` after a member deleted on the worker); a kill. After
every test nothing of a gang is left on any of the three clusters, Workloads included.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import OtherQueue, RetryAsIs, ShrinkTo
from gang_sim.testing import multikueue as wiring
from gang_sim.testing.real.multikueue import MANAGER, WORKER_1, WORKER_2, RealMultiKueue
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod, summary_of, task_instance
from tests.e2e.test_kill_and_adopt import on_kill_with_state
from tests.real.backends import wait_for

pytestmark = pytest.mark.timeout(900)

CONNECTIONS = {MANAGER: "mk_manager", WORKER_1: "mk_worker1", WORKER_2: "mk_worker2"}
LABELLED = ("pods", "jobs.batch", "services", "configmaps")


@contextmanager
def connections(kubeconfig: str) -> Iterator[None]:
    """An Airflow connection per cluster: the setup's kubeconfig with that cluster's context."""
    variables = {f"AIRFLOW_CONN_{conn_id.upper()}": conn_id for conn_id in CONNECTIONS.values()}
    previous = {variable: os.environ.get(variable) for variable in variables}
    for context, conn_id in CONNECTIONS.items():
        extra = {"kube_config_path": kubeconfig, "cluster_context": context}
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps({"conn_type": "kubernetes", "extra": extra})
    try:
        yield
    finally:
        for variable, value in previous.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value


@pytest.fixture(scope="module")
def setup() -> Iterator[RealMultiKueue]:
    with RealMultiKueue() as started, connections(str(started.kubeconfig_path)):
        print(f"MultiKueue manager and two workers ready in {started.started_in_seconds:.1f} s")
        yield started


def leftovers(setup: RealMultiKueue) -> dict[str, list[str]]:
    """What of any gang is on any of the three clusters: the gang-labelled objects in ``default`` and
    every Workload there (Kueue's carry no gang label)."""
    found: dict[str, list[str]] = {}
    for place, cluster in setup.clusters.items():
        kinds = [(kind, ["-l", naming.GANG_LABEL]) for kind in LABELLED] + [("workloads.kueue.x-k8s.io", [])]
        for kind, selector in kinds:
            items = json.loads(cluster.kubectl("get", kind, "-n", "default", "-o", "json", *selector))["items"]
            if items:
                found[f"{place} {kind}"] = [item["metadata"]["name"] for item in items]
    return found


@pytest.fixture
def clusters(setup: RealMultiKueue) -> Iterator[RealMultiKueue]:
    """The module's setup; after the test, until nothing of a gang is left anywhere (MultiKueue and the
    garbage collectors work asynchronously)."""
    yield setup
    wait_for(lambda: not leftovers(setup), timeout=120, what="nothing of a gang left on the three clusters")


def arguments(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "size": 2,
        "gpus": 1,
        "cpu": "1",
        "pod_template": simulated_pod(5),
        "reservation": "kueue",
        "kueue_queue": "team",
        "deferrable": True,
        "kubernetes_conn_id": CONNECTIONS[MANAGER],
        "multikueue_connections": {WORKER_1: CONNECTIONS[WORKER_1], WORKER_2: CONNECTIONS[WORKER_2]},
        "reservation_timeout": timedelta(minutes=3),
        "startup_timeout": timedelta(minutes=2),
    }
    return {**values, **overrides}


def test_a_gang_runs_on_the_worker_that_can_admit_it(
    clusters: RealMultiKueue, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's "done when": a gang of 2 to the manager's ``team`` queue with connections for both
    workers succeeds, its log names worker-2, and nothing of it is left anywhere (the fixture)."""
    dag_run = run_dag_test(gang_dag("real_multikueue", **arguments(distributed="torch")))
    captured = capfd.readouterr()
    logs = "\n".join([captured.out, captured.err, caplog.text])
    assert task_instance(dag_run).state == "success", logs[-4000:]
    summary = summary_of(dag_run)
    (tried,) = summary["tries"]
    assert (tried["worker_cluster"], tried["worker_kubernetes_conn_id"]) == (WORKER_2, CONNECTIONS[WORKER_2])
    assert summary["exit_codes"] == {"0": 0, "1": 0}
    assert "admitted by MultiKueue worker cluster 'worker-2'" in logs, logs[-4000:]


def test_a_worker_without_a_connection_is_followed_through_the_managers_mirror(clusters: RealMultiKueue) -> None:
    values = arguments(multikueue_connections={WORKER_1: CONNECTIONS[WORKER_1]})
    dag_run = run_dag_test(gang_dag("real_multikueue_unmapped", **values))
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["worker_cluster"], summary["worker_kubernetes_conn_id"], summary["exit_codes"]) == (
        WORKER_2,
        None,
        {},
    )


def test_no_worker_admitting_it_ends_at_the_deadline_then_a_smaller_gang_runs(clusters: RealMultiKueue) -> None:
    values = arguments(size=5, min_size=4, reservation_timeout=timedelta(seconds=30), fallbacks=[ShrinkTo(4)])
    dag_run = run_dag_test(gang_dag("real_multikueue_shrink", retries=1, **values))
    assert task_instance(dag_run).state == "success"
    tries = summary_of(dag_run)["tries"]
    assert [(item["outcome"], item["size"], item["worker_cluster"]) for item in tries] == [
        ("deadline", 5, None),
        ("all_succeeded", 4, WORKER_2),
    ]


def test_another_queue_of_the_manager_takes_the_gang(clusters: RealMultiKueue) -> None:
    tiny = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
    clusters.manager.apply(wiring.queue_objects(tiny, queue="tiny", namespace="default", admission_check=wiring.CHECK))
    values = arguments(kueue_queue="tiny", reservation_timeout=timedelta(seconds=30), fallbacks=[OtherQueue("team")])
    dag_run = run_dag_test(gang_dag("real_multikueue_other_queue", retries=1, **values))
    assert task_instance(dag_run).state == "success"
    tries = summary_of(dag_run)["tries"]
    assert [(item["outcome"], item["queue"], item["worker_cluster"]) for item in tries] == [
        ("deadline", "tiny", None),
        ("all_succeeded", "team", WORKER_2),
    ]


def running_on_worker_2(clusters: RealMultiKueue, gang: str) -> list[str]:
    pods = json.loads(
        clusters.clusters[WORKER_2].kubectl(
            "get", "pods", "-n", "default", "-l", f"{naming.GANG_LABEL}={gang}", "-o", "json"
        )
    )["items"]
    return [pod["metadata"]["name"] for pod in pods if (pod.get("status") or {}).get("phase") == "Running"]


def test_a_member_deleted_on_the_worker_is_retried_as_is(clusters: RealMultiKueue) -> None:
    op = GangTrainingOperator(
        task_id="train", retries=1, **arguments(pod_template=simulated_pod(20), fallbacks=[RetryAsIs()])
    )
    first = context_for(FakeTaskInstance("real_multikueue_retry", "run-1", try_number=1))
    run = deferred(op.execute_reserved, first, first_event(deferred(op.execute, first), timeout=300))
    names = wait_for(lambda: running_on_worker_2(clusters, run.gang_name) or None, timeout=120, what="a member")
    clusters.clusters[WORKER_2].kubectl("delete", "pod", names[0], "-n", "default", "--wait=false")
    event = first_event(run, timeout=300)
    assert event["status"] == "failure" and event["reason"] in ("member_lost", "member_failed"), event
    with pytest.raises(Exception, match=event["reason"]):
        op.execute_finished(first, event)
    second = context_for(FakeTaskInstance("real_multikueue_retry", "run-1", try_number=2))
    run = deferred(op.execute_reserved, second, first_event(deferred(op.execute, second), timeout=300))
    summary = op.execute_finished(second, first_event(run, timeout=300))
    assert [(item["outcome"], item["worker_cluster"]) for item in summary["tries"]] == [
        (event["reason"], WORKER_2),
        ("all_succeeded", WORKER_2),
    ]


def test_a_kill_during_the_run_leaves_nothing_on_any_cluster(clusters: RealMultiKueue) -> None:
    op = GangTrainingOperator(task_id="train", **arguments(pod_template=simulated_pod(600)))
    context = context_for(FakeTaskInstance("real_multikueue_kill", "run-1"))
    run = deferred(op.execute_reserved, context, first_event(deferred(op.execute, context), timeout=300))
    wait_for(lambda: len(running_on_worker_2(clusters, run.gang_name)) == 2 or None, timeout=120, what="members")
    on_kill_with_state(run, "failed")

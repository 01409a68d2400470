"""``kueue`` mode on a Kueue MultiKueue manager, on three ``gang-sim`` instances
(``tests.e2e.multikueue_clusters``): the manager dispatches the Job to the worker that can admit it
(``worker-2``); the provider follows the members there through the mapped connection, or through
the manager's mirrored Job status when none is mapped; the ladder's ``ShrinkTo`` and ``OtherQueue``
work through it; RBAC on the manager and the workers is exactly ``deploy/``'s. Faults:
``test_multikueue_faults.py``. Every test ends with nothing of any gang on any of the three clusters
(Workloads included)."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_gang.hooks.precheck import WORKER_NEEDS, permissions_needed
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangFailedForGood
from airflow_provider_gang.reservation.fallback import OtherQueue, ShrinkTo
from demo.cluster import free_port
from gang_sim.testing import multikueue as wiring
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import gang_dag, summary_of, task_instance
from tests.e2e.multikueue_clusters import (
    DDP_IMAGE,
    QUEUE,
    WORKER_1,
    WORKER_1_CONN,
    WORKER_2,
    WORKER_2_CONN,
    MultiKueueClusters,
    arguments,
    multikueue_clusters,
    nothing_left,
)
from tests.e2e.test_rbac import Grant, connect_as, grants_of
from tests.e2e.test_ui_state import gang_page

TRAINER = Path(__file__).resolve().parents[2] / "dags" / "trainer" / "ddp_train.py"
TRAIN_THEN_LINGER = (
    f"import os, runpy, time; runpy.run_path({str(TRAINER)!r}, run_name='__main__'); "
    "time.sleep(0 if os.environ['RANK'] == '0' else 3)"
)


def task_log(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
    captured = capfd.readouterr()
    return "\n".join([captured.out, captured.err, caplog.text])


@pytest.mark.timeout(300)
def test_a_distributed_gang_trains_on_the_worker_that_admits_it(
    cluster_factory: Any,
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two real PyTorch DDP ranks (gloo) on worker-2, rendezvousing through the headless Service the
    provider made there (Kueue copies only the Job); rank 0's report is read from worker-2. MultiKueue
    deletes the worker's copies - pods and logs - as soon as the gang finished, so the run wait reads
    a log rank's tail the moment it sees that member end: rank 1 lingers 3 s after training here, so
    the test does not hinge on that race (a gang whose members end together may lose it)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    clusters = multikueue_clusters(cluster_factory)
    values = arguments(
        image=DDP_IMAGE,
        command=["python", "-u", "-c", TRAIN_THEN_LINGER],
        cpu="1",
        distributed="torch",
        master_port=free_port(),
        run_timeout=timedelta(seconds=180),
    )
    del values["pod_template"]
    dag_run = run_dag(gang_dag("multikueue_ddp", **values))
    logs = task_log(capfd, caplog)
    assert task_instance(dag_run).state == "success", logs[-4000:]
    summary = summary_of(dag_run)
    (tried,) = summary["tries"]
    assert (tried["worker_cluster"], tried["worker_kubernetes_conn_id"]) == (WORKER_2, WORKER_2_CONN)
    assert summary["exit_codes"] == {"0": 0, "1": 0}
    assert "admitted by MultiKueue worker cluster 'worker-2'" in logs, logs[-3000:]
    reports = [
        json.loads(line.split("[rank 0] ", 1)[1].split("}", 1)[0] + "}")
        for line in logs.splitlines()
        if "[rank 0] {" in line
    ]
    ranks = [line for line in logs.splitlines() if "rank" in line]
    assert len(reports) == 1 and reports[0]["world_size"] == 2, "\n".join(ranks[-40:])
    nothing_left(clusters)


def gangs_page() -> str:
    """The Gangs page (every gang task instance), as a viewer gets it from the api-server."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_provider_gang.plugin.routes import gang_app

    gang_app.dependency_overrides[get_user] = lambda: SimpleAuthManagerUser(username="viewer", role="viewer")
    try:
        response = TestClient(gang_app).get("/ui/gangs")
    finally:
        gang_app.dependency_overrides.clear()
    assert response.status_code == 200, response.text
    return str(response.text)


def test_a_worker_without_a_connection_is_followed_through_the_managers_mirror(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    clusters = multikueue_clusters(cluster_factory)
    dag_run = run_dag(gang_dag("multikueue_unmapped", **arguments(multikueue_connections={WORKER_1: WORKER_1_CONN})))
    logs = task_log(capfd, caplog)
    assert task_instance(dag_run).state == "success", logs[-4000:]
    summary = summary_of(dag_run)
    (tried,) = summary["tries"]
    assert (tried["worker_cluster"], tried["worker_kubernetes_conn_id"]) == (WORKER_2, None)
    assert summary["exit_codes"] == {}  # no member detail at this distance
    assert "MultiKueue worker 'worker-2' has no connection in multikueue_connections" in logs, logs[-3000:]
    assert "through the status of Job" in logs and "(rank 0: log unavailable - MultiKueue worker" in logs
    page = gang_page(dag_run.dag_id, dag_run.run_id)  # the Gang view, as the api-server serves it
    assert "as configured (MultiKueue worker worker-2, no connection)" in page, page[-3000:]
    assert "Not visible: MultiKueue worker &#39;worker-2&#39; has no connection" in page, page[-3000:]
    gangs = gangs_page()
    assert "queue team · worker worker-2" in gangs, gangs[-3000:]
    nothing_left(clusters)


def test_no_worker_admitting_it_ends_at_the_deadline_and_a_smaller_gang_runs(
    cluster_factory: Any, run_dag: Any
) -> None:
    """Five GPUs: the manager's quota holds them, no worker does (worker-1 has none, worker-2 four):
    the reservation deadline ends try 1 (``min_size=4`` is only ShrinkTo's floor here: no partial
    admission through MultiKueue); ShrinkTo(4) fits worker-2."""
    clusters = multikueue_clusters(cluster_factory)
    values = arguments(size=5, min_size=4, reservation_timeout=timedelta(seconds=8), fallbacks=[ShrinkTo(4)])
    dag_run = run_dag(gang_dag("multikueue_shrink", retries=1, **values))
    assert task_instance(dag_run).state == "success"
    tries = summary_of(dag_run)["tries"]
    assert [(item["outcome"], item["size"], item["worker_cluster"]) for item in tries] == [
        ("deadline", 5, None),
        ("all_succeeded", 4, WORKER_2),
    ]
    assert "admission check 'multikueue' pending" in tries[0]["message"]
    nothing_left(clusters)


def test_another_queue_of_the_manager_takes_the_gang(cluster_factory: Any, run_dag: Any) -> None:
    """The manager's LocalQueue ``tiny`` (1 GPU of quota, the same MultiKueue check) cannot reserve the
    gang; OtherQueue moves it to ``team``, which dispatches it to worker-2."""
    clusters = multikueue_clusters(cluster_factory)
    tiny = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
    wiring.queues(clusters.manager, tiny, queue="tiny", namespace="default", admission_check=wiring.CHECK)
    values = arguments(kueue_queue="tiny", reservation_timeout=timedelta(seconds=8), fallbacks=[OtherQueue(QUEUE)])
    dag_run = run_dag(gang_dag("multikueue_other_queue", retries=1, **values))
    assert task_instance(dag_run).state == "success"
    tries = summary_of(dag_run)["tries"]
    assert [(item["outcome"], item["queue"], item["worker_cluster"]) for item in tries] == [
        ("deadline", "tiny", None),
        ("all_succeeded", QUEUE, WORKER_2),
    ]
    nothing_left(clusters)


def test_partial_admission_is_not_used_through_multikueue(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """``min_size < size`` would let Kueue admit fewer members; through MultiKueue the Job asks for
    all of them (the members' sizes are plain values, no world ConfigMap is needed on the worker)."""
    clusters = multikueue_clusters(cluster_factory)
    dag_run = run_dag(gang_dag("multikueue_partial", **arguments(size=3, min_size=2)))
    logs = task_log(capfd, caplog)
    assert task_instance(dag_run).state == "success", logs[-4000:]
    assert summary_of(dag_run)["size_run"] == 3
    assert "asks for Kueue partial admission, which is not used through MultiKueue" in logs
    nothing_left(clusters)


def test_a_worker_mapped_to_a_connection_that_does_not_exist_fails_for_good(cluster_factory: Any) -> None:
    clusters = multikueue_clusters(cluster_factory)
    op = GangTrainingOperator(task_id="train", **arguments(multikueue_connections={WORKER_2: "kube_nowhere"}))
    context = context_for(FakeTaskInstance("multikueue_no_connection", "run-1"))
    event = first_event(deferred(op.execute, context))
    with pytest.raises(
        GangFailedForGood, match="maps MultiKueue worker cluster 'worker-2' to connection 'kube_nowhere'"
    ):
        op.execute_reserved(context, event)
    nothing_left(clusters)


WORKER_RBAC = Path(__file__).resolve().parents[2] / "deploy" / "rbac-multikueue-worker.yaml"


def worker_grants() -> frozenset[Grant]:
    """What the Role of ``deploy/rbac-multikueue-worker.yaml`` grants, as ``test_rbac`` reads a Role."""
    (role,) = [doc for doc in yaml.safe_load_all(WORKER_RBAC.read_text()) if doc and doc["kind"] == "Role"]
    return frozenset(
        Grant(verb, group, resource)
        for rule in role["rules"]
        for verb in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    )


def test_the_worker_role_is_exactly_what_a_try_asks_of_a_worker() -> None:
    spec = GangTrainingOperator(task_id="train", **arguments(distributed="torch")).build_spec("g")
    asked = {
        Grant(need.verb, need.resource.group, need.rbac_resource) for need in permissions_needed(spec, WORKER_NEEDS)
    }
    assert worker_grants() == asked


def connect_everyone(clusters: MultiKueueClusters, monkeypatch: pytest.MonkeyPatch, worker: frozenset[Grant]) -> None:
    """``rbac_manager`` with exactly the kueue Role and ClusterRole of ``deploy/rbac.yaml``; the workers'
    ``rbac_worker-1`` / ``rbac_worker-2`` with ``worker``."""
    connect_as(clusters.manager, monkeypatch, "rbac_manager", grants_of("kueue"))
    for name, cluster in clusters.workers.items():
        connect_as(cluster, monkeypatch, f"rbac_{name}", worker)


def rbac_arguments() -> dict[str, Any]:
    return arguments(
        distributed="torch",
        kubernetes_conn_id="rbac_manager",
        multikueue_connections={name: f"rbac_{name}" for name in (WORKER_1, WORKER_2)},
    )


def test_a_gang_runs_with_the_kueue_role_on_the_manager_and_the_worker_role_on_the_workers(
    cluster_factory: Any, run_dag: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clusters = multikueue_clusters(cluster_factory)
    connect_everyone(clusters, monkeypatch, worker_grants())
    for cluster in clusters.all().values():
        cluster.emulator.metrics.reset()  # type: ignore[union-attr]
    dag_run = run_dag(gang_dag("multikueue_rbac", **rbac_arguments()))
    assert task_instance(dag_run).state == "success"
    assert summary_of(dag_run)["tries"][0]["worker_cluster"] == WORKER_2
    for place, cluster in clusters.all().items():
        assert "403" not in cluster.emulator.metrics.snapshot()["codes"], place  # type: ignore[union-attr]
    used = clusters.manager.emulator.metrics.snapshot()["requests"]  # type: ignore[union-attr]
    assert used["get"]["admissionchecks.kueue.x-k8s.io"] == 1  # the queue's one check, read by the precheck
    assert used["watch"]["jobs.batch"] >= 1  # the manager's mirror of the worker's Job, followed
    worker_used = clusters.workers[WORKER_2].emulator.metrics.snapshot()["requests"]  # type: ignore[union-attr]
    assert worker_used["create"]["services"] == 1  # the rendezvous Service, there and nowhere else
    assert "services" not in used.get("create", {})
    nothing_left(clusters)


def test_a_rule_missing_on_the_worker_is_refused_naming_it(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clusters = multikueue_clusters(cluster_factory)
    removed = Grant("create", "", "services")
    connect_everyone(clusters, monkeypatch, worker_grants() - {removed})
    op = GangTrainingOperator(task_id="train", **rbac_arguments())
    context = context_for(FakeTaskInstance("multikueue_rbac_missing", "run-1"))
    event = first_event(deferred(op.execute, context))
    with pytest.raises(GangFailedForGood) as refused:
        op.execute_reserved(context, event)
    message = str(refused.value)
    assert "missing permission on MultiKueue worker cluster 'worker-2' in namespace 'default'" in message, message
    assert "create services (the members' headless Service there)" in message, message
    nothing_left(clusters)

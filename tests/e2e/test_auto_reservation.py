"""``reservation="auto"`` end to end on gang-sim: each try asks the discovery of its cluster whether
Kubernetes' own gang scheduling (PodGroups) is served, runs as ``workload`` where it is and as
``gates`` where it is not, and says which it chose. Faults come from outside the provider: the
emulator's discovery faults and its 503s for every resource request."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import OtherCluster
from demo.cluster import CONN_ID
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance
from tests.e2e.test_kill_and_adopt import gang_objects
from tests.e2e.two_clusters import B_CONN, FOUR_GPUS, NO_GPUS, QUICK

POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"
PROVISIONING_REQUESTS = "autoscaling.x-k8s.io/v1/provisioningrequests"
CHOSE_WORKLOAD = "reservation='auto' chose 'workload' for try"
CHOSE_GATES = "reservation='auto' chose 'gates' for try"


def created_kinds(cluster: ClusterHarness) -> list[str]:
    """The resource of every object ADDED to ``cluster`` from now on."""
    added: list[str] = []

    def record(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if event_type == "ADDED":
            added.append(resource)

    cluster.run(lambda: cluster.store.subscribe(record))
    return added


def auto_dag(dag_id: str, **arguments: Any) -> Any:
    values: dict[str, Any] = {
        "size": 2,
        "gpus": 1,
        "pod_template": simulated_pod(10),
        "reservation": "auto",
        "deferrable": True,
        "reservation_timeout": timedelta(seconds=60),
        "client_options": QUICK,
    }
    return gang_dag(dag_id, **(values | arguments))


def test_a_cluster_serving_pod_groups_runs_the_gang_as_workload(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    added = created_kinds(cluster)
    dag_run = run_dag(auto_dag("auto_workload"))
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert summary["reservation_mode"] == "workload"
    assert [item["mode"] for item in summary["tries"]] == ["workload"]
    assert CHOSE_WORKLOAD in capfd.readouterr().out
    assert POD_GROUPS in added and PROVISIONING_REQUESTS not in added
    assert cluster.objects(POD_GROUPS) == [] and cluster.objects("v1/pods") == []


def test_a_cluster_without_pod_groups_runs_the_gang_as_gates(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster = cluster_factory("small", time_scale=60, serve_workload_api=False)
    added = created_kinds(cluster)
    dag_run = run_dag(auto_dag("auto_gates"))
    assert task_instance(dag_run).state == "success"
    assert summary_of(dag_run)["reservation_mode"] == "gates"
    assert CHOSE_GATES in capfd.readouterr().out
    assert PROVISIONING_REQUESTS in added and POD_GROUPS not in added
    assert cluster.objects(PROVISIONING_REQUESTS) == [] and cluster.objects("v1/pods") == []


def test_discovery_failing_past_its_retries_ends_the_try_with_nothing_created_and_the_retry_chooses(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """Every attempt of try 1's discovery GET is answered 503 (QUICK: two attempts per request)."""
    cluster = cluster_factory("small", time_scale=60)
    added = created_kinds(cluster)
    attempts = QUICK["retry_attempts"]
    cluster.emulator.faults = Faults.parse(f"discovery/scheduling.k8s.io/v1beta1:1.0:503:count:{attempts}")
    try:
        dag_run = run_dag(auto_dag("auto_discovery_fails", retries=1))
    finally:
        cluster.emulator.faults = Faults()
    out = capfd.readouterr().out
    assert task_instance(dag_run).state == "success", out[-3000:]
    first, second = summary_of(dag_run)["tries"]
    assert (first["outcome"], first["mode"], first["gang"]) == ("cluster_unreachable", "auto", "")
    assert (second["outcome"], second["mode"]) == ("all_succeeded", "workload")
    assert out.count(CHOSE_WORKLOAD) == 1 and CHOSE_GATES not in out
    assert added.count(POD_GROUPS) == 1  # try 1 created nothing, not even its owner ConfigMap
    assert added.count("v1/configmaps") == 1


@pytest.mark.timeout(300)
def test_each_try_chooses_on_its_own_cluster(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """Cluster A serves no PodGroups and answers every resource request 503 (its discovery works);
    cluster B serves them: try 1 chooses ``gates`` on A and cannot reach it, the ``OtherCluster``
    step's try 2 chooses ``workload`` on B."""
    cluster_a = cluster_factory(NO_GPUS, time_scale=60, serve_workload_api=False)
    cluster_b = cluster_factory(FOUR_GPUS, time_scale=60, conn_id=B_CONN)
    cluster_a.emulator.faults = Faults.parse("*:1.0:503")
    try:
        dag_run = run_dag(auto_dag("auto_other_cluster", retries=1, fallbacks=[OtherCluster(B_CONN)]))
    finally:
        cluster_a.emulator.faults = Faults()
    out = capfd.readouterr().out
    assert task_instance(dag_run).state == "success", out[-3000:]
    tries = [(item["mode"], item["outcome"], item["kubernetes_conn_id"]) for item in summary_of(dag_run)["tries"]]
    assert tries == [("gates", "cluster_unreachable", CONN_ID), ("workload", "all_succeeded", B_CONN)]
    assert f"{CHOSE_GATES} 1: cluster {CONN_ID!r}" in out and f"{CHOSE_WORKLOAD} 2: cluster {B_CONN!r}" in out
    assert cluster_b.objects(POD_GROUPS) == [] and cluster_a.objects(PROVISIONING_REQUESTS) == []


def test_a_try_adopting_a_workload_gang_keeps_its_mode_and_objects(
    cluster_factory: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """Try 1 chose ``workload`` and created its gang, then its worker died while waiting (its trigger
    never ran); try 2 adopts
    the gang - the same PodGroup and members, no second choice - and runs it to the end."""
    from airflow_provider_gang.operators import GangTrainingOperator

    cluster = cluster_factory("small", time_scale=60)
    operator = GangTrainingOperator(
        task_id="train",
        size=4,
        gpus=1,
        pod_template=simulated_pod(30),
        reservation="auto",
        deferrable=True,
        kubernetes_conn_id=CONN_ID,
    )
    first = context_for(FakeTaskInstance("auto_adopt", "run-1", try_number=1))
    waiting = deferred(operator.execute, first)
    gang = waiting.gang_name
    created = {kind: sorted(names) for kind, names in gang_objects(cluster, gang).items()}
    groups = [group["metadata"]["uid"] for group in cluster.objects(POD_GROUPS)]
    assert len(groups) == 1 and len(created["v1/pods"]) == 4
    assert capfd.readouterr().out.count(CHOSE_WORKLOAD) == 1

    second = context_for(FakeTaskInstance("auto_adopt", "run-1", try_number=2))
    adopted = deferred(operator.execute, second)
    assert adopted.gang_name == gang
    assert CHOSE_WORKLOAD not in capfd.readouterr().out  # the adopted plan keeps the mode it was stored with
    assert [group["metadata"]["uid"] for group in cluster.objects(POD_GROUPS)] == groups
    assert {kind: sorted(names) for kind, names in gang_objects(cluster, gang).items()} == created
    run_trigger = deferred(operator.execute_reserved, second, first_event(adopted))
    summary = operator.execute_finished(second, first_event(run_trigger))
    assert [(item["attempt"], item["mode"], item["outcome"]) for item in summary["tries"]] == [
        (1, "workload", "worker_lost"),
        (2, "workload", "all_succeeded"),
    ]
    eventually(lambda: cluster.objects(POD_GROUPS) == [], timeout=30.0, what="the PodGroup deleted")
    assert cluster.objects("v1/pods", label_selector=f"{naming.GANG_LABEL}={gang}") == []

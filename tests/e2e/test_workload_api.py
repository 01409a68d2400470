"""``reservation="workload"`` (Kubernetes' own gang scheduling, KEP-4671) end to end on gang-sim.

The emulator serves ``scheduling.k8s.io/v1beta1`` PodGroups and its scheduler places a gang's
``minCount`` members at once or none (``gang_sim.controllers.gang_scheduling``); the real-tier twin of
these tests is ``tests/real/test_workload_api.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance

POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"


def test_workload_gang_succeeds(cluster_factory: Any, run_dag: Any) -> None:
    cluster = cluster_factory("small", time_scale=60)
    dag = gang_dag(
        "workload_success",
        size=4,
        gpus=1,
        pod_template=simulated_pod(60),
        reservation="workload",
        deferrable=True,
        reservation_timeout=timedelta(seconds=600),
        startup_timeout=timedelta(seconds=60),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert (summary["reservation_mode"], summary["size_run"]) == ("workload", 4)
    assert cluster.objects("v1/pods") == []
    assert cluster.objects(POD_GROUPS) == []


def test_a_cluster_without_the_pod_group_api_is_refused_naming_the_gate_and_gates(
    cluster_factory: Any, run_dag: Any, capfd: Any
) -> None:
    cluster = cluster_factory("small", time_scale=60, serve_workload_api=False)
    dag = gang_dag("workload_not_served", size=2, gpus=1, pod_template=simulated_pod(5), reservation="workload")
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "failed"
    out = capfd.readouterr().out
    assert "does not serve podgroups.scheduling.k8s.io/v1beta1" in out
    assert "GenericWorkload=true" in out and "reservation='gates'" in out
    assert (
        cluster.objects("v1/pods") == []
        and cluster.objects("v1/configmaps", label_selector="airflow-gang.io/gang") == []
    )

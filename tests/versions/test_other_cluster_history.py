"""A try that fails over to another cluster (``OtherCluster``) keeps the task instance's one try history
where every try and the UI plugin look for it: on Airflow 3.1 and 3.2, the history ConfigMap on the
operator's own cluster (``operators.try_run.TryRun._history_cluster``), not split between the two;
on 3.3, Airflow's task state store. Two emulators, as ``tests/e2e/test_other_cluster.py`` sets them up.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.naming import TRY_HISTORY_ROLE
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.sweep.airflow_state import has_task_state_store
from demo.cluster import CONN_ID
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance
from tests.e2e.two_clusters import ARGUMENTS, B_CONN, two_clusters
from tests.versions.test_history_pages import LANE, get


def histories(cluster: Any) -> list[dict[str, Any]]:
    """The ``data`` of every history ConfigMap on ``cluster``, values decoded."""
    found = cluster.objects("v1/configmaps", "default", label_selector=f"{naming.ROLE_LABEL}={TRY_HISTORY_ROLE}")
    return [{key: json.loads(value) for key, value in (item.get("data") or {}).items()} for item in found]


@pytest.mark.timeout(300)
def test_a_try_on_another_cluster_records_into_the_one_history_of_the_task(cluster_factory: Any, run_dag: Any) -> None:
    cluster_a, cluster_b = two_clusters(cluster_factory)
    dag_run = run_dag(
        gang_dag("versions_other_cluster", retries=1, pod_template=simulated_pod(10), deferrable=True, **ARGUMENTS)
    )
    assert task_instance(dag_run).state == "success"
    tries = [(item["outcome"], item["kubernetes_conn_id"]) for item in summary_of(dag_run)["tries"]]
    assert tries == [("capacity_not_found", CONN_ID), ("all_succeeded", B_CONN)]  # try 2 read try 1's record
    if not has_task_state_store():
        (history,) = histories(cluster_a)
        assert [item["attempt"] for item in history[task_state.TRIES_KEY]] == [1, 2]
        assert task_state.CURRENT_KEY not in history
        assert histories(cluster_b) == []
    page = get("/ui/reservation", dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id="train")
    assert LANE.findall(page) == [("failed", "1", "capacity_not_found"), ("succeeded", "2", "all_succeeded")]
    assert re.search(rf"<td>2</td><td>other cluster {B_CONN} \(cluster {B_CONN}\)</td>", page), page

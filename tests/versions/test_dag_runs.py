"""``dag.test()`` through the main path and the retry path, on whichever Airflow this venv has.

Run by the main suite and by every venv of ``make versions``: on 3.1 and 3.2 the task runner gives
no ``task_state_store``, so the try history lives in the cluster (``operators.try_history``) and try 2
finds try 1's record there; on 3.3 it is Airflow's task state store. The cluster runs at 10x, not
the 60x of ``tests/e2e``: a 10-minute booking then lasts a minute of wall time, so a loaded machine
resuming the task late does not let it expire before launch.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_provider_gang.reservation.fallback import ShrinkTo
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance


def test_a_gang_runs_to_success(cluster_factory: Any, run_dag: Any) -> None:
    cluster = cluster_factory("small", time_scale=10)
    dag = gang_dag("versions_main", size=2, gpus=1, pod_template=simulated_pod(20), deferrable=True)
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert summary["size_run"] == 2
    assert [(item["attempt"], item["outcome"]) for item in summary["tries"]] == [(1, "all_succeeded")]
    assert cluster.objects("v1/pods") == []


def shrinking_dag(dag_id: str) -> Any:
    """A gang of 8 that cannot fit the ``small`` scenario (at most four 1-GPU nodes): try 1 waits past
    its 10 s deadline, try 2 shrinks to 4 members and succeeds."""
    return gang_dag(
        dag_id,
        retries=1,
        size=8,
        min_size=4,
        gpus=1,
        pod_template=simulated_pod(20),
        fallbacks=[ShrinkTo(4)],
        reservation_timeout=timedelta(seconds=10),
        deferrable=True,
    )


def test_a_retry_takes_the_next_rung_from_the_stored_history(cluster_factory: Any, run_dag: Any) -> None:
    cluster_factory("small", time_scale=10)
    dag_run = run_dag(shrinking_dag("versions_retry"))
    ti = task_instance(dag_run)
    assert (ti.state, ti.try_number) == ("success", 2)
    first, second = summary_of(dag_run)["tries"]
    assert (first["size"], first["outcome"]) == (8, "deadline")
    assert (second["size"], second["step"], second["outcome"]) == (4, "shrink to 4 members", "all_succeeded")

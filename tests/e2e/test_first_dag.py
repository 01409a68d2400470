"""The first hour of a new user: a DAG written from the README runs on ``gang-sim serve --scenario demo``.

The DAG file is what a README reader writes: ``GangTrainingOperator`` with ``image="python:3.11-slim"``,
a ``python -c`` command printing its rank, timeouts in seconds. It runs with the real ``airflow dags
test`` CLI as a subprocess, against ``gang-sim serve`` started as a subprocess
(:func:`tests.standalone.clusters.start_cluster`) whose kubeconfig the ``kubernetes_default``
connection reads through ``AIRFLOW_CONN_KUBERNETES_DEFAULT``. ``python:*`` images run as local
processes in the shipped scenarios, so both members really run, and rank 0's output is copied into the
task log (``log_ranks`` default), which ``dags test`` prints.

The subprocess shares this pytest run's Airflow home and metadata database (migrated by the
``airflow_db`` fixture of ``tests/e2e/conftest.py``; a fresh ``airflow db migrate`` would double the
test's time), with its own DAGs folder and without pytest's ``unit_test_mode``.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

from tests.standalone.clusters import ClusterSpec, connection_json, kubectl, start_cluster
from tests.standalone.processes import BIN, tail

DAG_FILE = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator

with DAG(dag_id="first_gang", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    GangTrainingOperator(
        task_id="train",
        image="python:3.11-slim",
        command=["python", "-c", "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])"],
        size=2,
        gpus=1,
        cpu="500m",
        memory="512Mi",
        distributed="torch",
        reservation_timeout=300,
        startup_timeout=120,
        run_timeout=120,
    )
"""


def test_a_readme_dag_completes_on_the_demo_scenario_and_logs_rank_0(tmp_path: Path) -> None:
    from airflow import settings

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "first_gang.py").write_text(textwrap.dedent(DAG_FILE))
    cluster = start_cluster(tmp_path, "first", ClusterSpec("demo", 60.0))
    try:
        env = {
            **{key: value for key, value in os.environ.items() if key != "AIRFLOW__CORE__UNIT_TEST_MODE"},
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": str(settings.SQL_ALCHEMY_CONN),
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": connection_json(cluster),
        }
        result = subprocess.run(
            [str(BIN / "airflow"), "dags", "test", "first_gang"],
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
            check=False,
        )
        output = result.stdout + result.stderr
        pods = kubectl(cluster, "get", "pods", "-n", "default", "-o", "name")
    finally:
        cluster.stop()
    assert result.returncode == 0, tail(output, 80)
    assert "[rank 0] rank 0 of 2" in output, tail(output, 80)  # rank 0's log, copied into the task log
    assert "[rank 1]" not in output  # log_ranks defaults to [0]
    finished = [line for line in output.splitlines() if "DagRun Finished: dag_id=first_gang" in line]
    assert len(finished) == 1 and "state=success" in finished[0], tail(output, 80)
    assert pods.split() == []  # on_finish="delete": nothing left in the cluster

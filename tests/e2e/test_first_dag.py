"""The first hour of a new user: a DAG written from the README runs on ``gang-sim serve --scenario demo``.

The DAG file is what a README reader writes: ``GangTrainingOperator`` with ``image="python:3.11-slim"``,
a ``python -c`` command printing its rank, timeouts in seconds. It runs with the real ``airflow dags
test`` CLI as a subprocess, against ``gang-sim serve`` started as a subprocess (:mod:`tests.e2e.dags_cli`).
``python:*`` images run as local processes in the shipped scenarios, so both members really run, and
rank 0's output is copied into the task log (``log_ranks`` default), which ``dags test`` prints.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.dags_cli import dags_test

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
    run = dags_test(tmp_path, "first_gang", DAG_FILE)
    assert run.returncode == 0, run.tail()
    assert "[rank 0] rank 0 of 2" in run.output, run.tail()  # rank 0's log, copied into the task log
    assert "[rank 1]" not in run.output  # log_ranks defaults to [0]
    assert run.finished_with("first_gang") == "success", run.tail()
    assert run.pods == []  # on_finish="delete": nothing left in the cluster

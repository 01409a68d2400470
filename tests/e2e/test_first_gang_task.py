"""The issue's "done when" for ``@task.gang``: a DAG file a README reader writes, in a folder of its
own (not the repository's ``dags/``), runs 3 ranks on ``gang-sim serve --scenario demo`` with the
real ``airflow dags test`` CLI and hands rank 0's dict to the next task; a misspelt argument of
``@task.gang`` is an import error of that file naming it.

As ``tests/e2e/test_first_dag.py`` does for the operator (:mod:`tests.e2e.dags_cli`); the CLI shares
this run's metadata database, so the XComs are read back here.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.e2e.dags_cli import dags_test

DAG_FILE = """
from datetime import datetime

from airflow.sdk import DAG, task

with DAG(dag_id="first_gang_task", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task.gang(image="python:3.11-slim", size=3, distributed="torch", reservation_timeout=300, run_timeout=120)
    def train(epochs: int) -> dict:
        import os

        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        print(f"rank {rank} of {world_size} trains {epochs} epochs")
        return {"rank": rank, "world_size": world_size, "loss": 0.5 / epochs}

    @task
    def report(metrics: dict) -> None:
        print("rank 0 returned", metrics)

    report(train(epochs=5))
"""


@pytest.mark.timeout(300)
def test_a_readme_dag_with_task_gang_runs_3_ranks_and_hands_rank_0_s_dict_on(tmp_path: Path) -> None:
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    run = dags_test(tmp_path, "first_gang_task", DAG_FILE)
    assert run.returncode == 0, run.tail()
    assert run.finished_with("first_gang_task") == "success", run.tail()
    assert "rank 0 returned {'rank': 0, 'world_size': 3, 'loss': 0.1}" in run.output, run.tail()
    assert "[rank 0] rank 0 of 3 trains 5 epochs" in run.output  # rank 0's log, copied into the task log
    assert run.pods == []
    (dag_run, *_) = sorted(DagRun.find(dag_id="first_gang_task"), key=lambda found: found.id, reverse=True)
    with create_session() as session:
        query = XComModel.get_many(run_id=dag_run.run_id, key="return_value", task_ids="train", dag_ids=dag_run.dag_id)
        assert XComModel.deserialize_value(session.scalars(query).first()) == {"rank": 0, "world_size": 3, "loss": 0.1}


def test_a_misspelt_argument_of_task_gang_is_an_import_error_naming_it(tmp_path: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag

    misspelt = DAG_FILE.replace("size=3,", "sizee=3,")
    (tmp_path / "misspelt.py").write_text(textwrap.dedent(misspelt))
    errors = DagBag(str(tmp_path)).import_errors
    (message,) = errors.values()
    assert "@task.gang got unknown argument(s): 'sizee' (did you mean 'size'?)" in message

"""The first hour of a new user: the quick start's and the README's first DAGs run on the emulator
exactly as those pages say.

Each DAG file is the one the page shows (``docs/examples/``, a ``literalinclude`` on the page; the
README's copy is checked against it in ``tests/docs/test_pages.py``), copied into a DAGs folder of the
test's own, and the page's three commands run as the page shows them
(:func:`tests.docs.emulator_session.run_first_dag`): ``gang-sim serve --scenario demo`` in the
background, the ``AIRFLOW_CONN_KUBERNETES_DEFAULT`` it exports, and the real ``airflow dags test``
CLI as a subprocess. ``python:*`` images run as local processes in the shipped scenarios, so every
member really runs, and rank 0's output is copied into the task log (``log_ranks`` default), which
``dags test`` prints.

The subprocess shares this pytest run's Airflow home and metadata database (migrated by the
``airflow_db`` fixture of ``tests/e2e/conftest.py``; a fresh ``airflow db migrate`` would double the
test's time), without pytest's ``unit_test_mode``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.docs.emulator_session import assert_succeeded, run_first_dag
from tests.docs.pages import DOCS
from tests.standalone.processes import BIN, tail

OPERATOR_DAG = DOCS / "examples" / "first_gang.py"
TASKFLOW_DAG = DOCS / "examples" / "first_gang_taskflow.py"


def _environment(dags: Path) -> dict[str, str]:
    from airflow import settings

    return {
        **{key: value for key, value in os.environ.items() if key != "AIRFLOW__CORE__UNIT_TEST_MODE"},
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": str(settings.SQL_ALCHEMY_CONN),
    }


def _dags_folder(tmp_path: Path, dag_file: Path) -> Path:
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(dag_file, dags / dag_file.name)
    return dags


def test_the_quick_start_dag_completes_on_the_demo_scenario_and_logs_rank_0(tmp_path: Path) -> None:
    dags = _dags_folder(tmp_path, OPERATOR_DAG)
    run = run_first_dag("docs/quickstart.md", "first_gang", work=tmp_path, bin_dir=BIN, env=_environment(dags))
    assert_succeeded(run, "first_gang")
    assert "[rank 0] rank 0 of 2" in run.output, tail(run.output, 80)  # rank 0's log, copied into the task log
    assert "[rank 1]" not in run.output  # log_ranks defaults to [0]


def test_the_readme_dag_runs_3_ranks_and_hands_rank_0s_dict_to_the_next_task(tmp_path: Path) -> None:
    dags = _dags_folder(tmp_path, TASKFLOW_DAG)
    run = run_first_dag("README.md", "first_gang_taskflow", work=tmp_path, bin_dir=BIN, env=_environment(dags))
    assert_succeeded(run, "first_gang_taskflow")
    assert "rank 0 returned {'rank': 0, 'size': 3, 'steps': 100}" in run.output, tail(run.output, 80)

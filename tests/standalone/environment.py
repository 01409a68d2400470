"""What the opt-in real-Airflow suites share: their DAG file, their clusters and Airflow, REST helpers.

Each suite (``test_real_triggerer.py``, ``test_ui.py``) writes a DAG file with two
``GangTrainingOperator`` DAGs (:func:`write_dags`): one gang of 8 that waits (connection
``gang_waiting``, zone us-central1-a, strict) and one gang of 2 that runs at once (connection
``gang_fast``). :func:`standalone` starts the ``demo`` cluster at 1.0x (``gang_waiting``: zone A
stays stocked out), the ``small`` cluster at 4.0x (``gang_fast``) and ``airflow standalone``, waits
until Airflow is healthy, logs in and waits for both DAGs to be parsed; on exit it stops them in
reverse order and removes the temporary directory, unless ``GANG_STANDALONE_KEEP=1`` (then it prints
its path).
"""

from __future__ import annotations

import os
import shutil
import string
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.standalone.processes import Airflow, Cluster, start_airflow, start_cluster, wait_for

DAGS = string.Template('''
"""$description"""
from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator


def simulated_pod(run_seconds):
    return {
        "metadata": {"annotations": {"sim.gang.dev/run-seconds": str(run_seconds)}},
        "spec": {"containers": [{"name": "trainer", "image": "trainer:sim", "command": ["train"]}]},
    }


for dag_id, conn_id, size, zone, run_seconds in (
    ("$waiting", "gang_waiting", 8, "us-central1-a", 3600),
    ("$success", "gang_fast", 2, None, $success_run_seconds),
):
    with DAG(dag_id=dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
             catchup=False) as dag:
        GangTrainingOperator(
            task_id="train", size=size, gpus=1, pod_template=simulated_pod(run_seconds), distributed="torch",
            reservation="provisioning_request", zone=zone, strict_zone=zone is not None,
            reservation_timeout=timedelta(minutes=20), deferrable=True, kubernetes_conn_id=conn_id, retries=0,
        )
    globals()[dag_id] = dag
''')


@dataclass(frozen=True)
class Dags:
    """The DAG file of a suite: its name, docstring, the two DAG ids and how long the fast gang runs."""

    file_name: str
    description: str
    waiting: str
    success: str
    success_run_seconds: int


def write_dags(directory: Path, dags: Dags) -> Path:
    """Write ``dags`` to ``directory/dags/<file_name>``; return the DAGs folder."""
    folder = directory / "dags"
    folder.mkdir()
    text = DAGS.substitute(description=dags.description, waiting=dags.waiting, success=dags.success,
                           success_run_seconds=dags.success_run_seconds)
    (folder / dags.file_name).write_text(textwrap.dedent(text))
    return folder


@dataclass
class Setup:
    airflow: Airflow
    waiting: Cluster
    fast: Cluster
    directory: Path


@contextmanager
def standalone(prefix: str, dags: Dags) -> Iterator[Setup]:
    """Both clusters and Airflow, healthy, logged in, both DAGs parsed, in a temporary directory
    named ``prefix...``; everything started is stopped (in reverse order) on exit, also on failure."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    stopping: list[Any] = []
    try:
        folder = write_dags(directory, dags)
        waiting = start_cluster(directory, "demo", 1.0)
        stopping.append(waiting.started)
        fast = start_cluster(directory, "small", 4.0)
        stopping.append(fast.started)
        airflow = start_airflow(directory, folder, {"gang_waiting": waiting.connection_json(),
                                                    "gang_fast": fast.connection_json()})
        stopping.append(airflow.started)
        wait_for(lambda: airflow.started.process.poll() is not None or airflow.healthy(), 240, "healthy Airflow", 2)
        assert airflow.started.process.poll() is None, airflow.started.log()[-4000:]
        wait_for(lambda: (airflow.home / "simple_auth_manager_passwords.json.generated").exists(), 30, "password")
        airflow.login()
        for dag_id in (dags.waiting, dags.success):
            wait_for(lambda dag_id=dag_id: dag_known(airflow, dag_id), 120, f"DAG {dag_id} parsed", 2)
        yield Setup(airflow, waiting, fast, directory)
    finally:
        for started in reversed(stopping):
            started.stop()
        if os.environ.get("GANG_STANDALONE_KEEP") == "1":
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def dag_known(airflow: Airflow, dag_id: str) -> bool:
    try:
        airflow.request("GET", f"/api/v2/dags/{dag_id}")
    except Exception:
        return False
    return True


def trigger(airflow: Airflow, dag_id: str) -> str:
    """Start a run of ``dag_id``; return its run id."""
    run = airflow.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None})
    return str(run["dag_run_id"])


def train_task(airflow: Airflow, dag_id: str, run_id: str) -> dict[str, Any]:
    """The ``train`` task instance of the run."""
    answer: dict[str, Any] = airflow.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/train")
    return answer

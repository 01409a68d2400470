"""What the real-Airflow suites share: their DAG file, their clusters and Airflow, REST helpers.

Each suite writes a DAG file of ``GangTrainingOperator`` DAGs (:class:`GangDag`, :func:`write_dags`)
and enters :func:`running_airflow` with the clusters its DAGs' connections point at
(:class:`~tests.standalone.clusters.ClusterSpec` per connection id). That starts the clusters and
Airflow's components (:mod:`.components`) in a temporary directory, waits until Airflow is healthy,
logs in and waits for the DAGs to be parsed; on exit - also on failure, and when pytest is stopped
with SIGTERM (``conftest.py``) - it stops everything it started, last started first, and removes
the directory unless ``GANG_STANDALONE_KEEP=1`` (then it prints its path).

``WAITING_AND_FAST`` is the pair of DAGs and clusters of ``test_real_triggerer.py`` and
``test_ui.py``: a gang of 8 that waits (connection ``gang_waiting``: the ``demo`` scenario on a
manual clock that never moves, so zone us-central1-a stays stocked out however slow the machine;
strict zone) and a gang of 2 that runs when its clock is moved (``gang_fast``: the ``small``
scenario on a manual clock, moved by :func:`drive_until_finished`).

Clocks move only once Airflow has :func:`settled`: a trigger that fires while the scheduler has not
yet drained the executor event of the worker run that deferred the task makes Airflow 3.3.2 fail
the resumed task ("Executor ... reported that the task instance ... finished with state success,
but the task instance's state attribute is running": apache/airflow#71580, #72716). A cluster at a
fixed speed can fire in that window on a loaded machine; a manual clock cannot.
"""

from __future__ import annotations

import os
import shutil
import string
import tempfile
import textwrap
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.standalone.clusters import ClusterSpec, connection_json, start_cluster
from tests.standalone.components import Airflow, start_airflow

FINISHED = ("success", "failed", "upstream_failed")
"""Task instance states after which a task's trigger can no longer fire."""
REACTION_SECONDS = 2.0
"""Real time a trigger gets to react to a clock step: its watch delivers the change in milliseconds."""
DEFERRED_LINE = "Pausing task as DEFERRED"
EXECUTOR_EVENT = "Received executor event with state success for task instance TaskInstanceKey(dag_id='{}'"

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


for dag_id, conn_id, size, zone, run_seconds, retries, deferrable in $gangs:
    with DAG(dag_id=dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
             catchup=False) as dag:
        GangTrainingOperator(
            task_id="train", size=size, gpus=1, pod_template=simulated_pod(run_seconds), distributed="torch",
            reservation="provisioning_request", zone=zone, strict_zone=zone is not None,
            reservation_timeout=timedelta(minutes=20), deferrable=deferrable, kubernetes_conn_id=conn_id,
            retries=retries,
            retry_delay=timedelta(seconds=1),
        )
    globals()[dag_id] = dag
''')


@dataclass(frozen=True)
class GangDag:
    """One DAG of the file: task ``train``, a (by default deferrable) gang of ``size`` one-GPU members on
    ``conn_id`` (strictly in ``zone`` if given) whose simulated containers run ``run_seconds``."""

    dag_id: str
    conn_id: str
    size: int
    zone: str | None
    run_seconds: int
    retries: int = 0
    """Airflow retries of ``train`` (one second apart)."""
    deferrable: bool = True
    """``False``: the worker waits inline (reserving and running) instead of deferring to the triggerer."""


@dataclass(frozen=True)
class Dags:
    """The DAG file of a suite: its name, docstring and DAGs."""

    file_name: str
    description: str
    gangs: tuple[GangDag, ...]

    @property
    def dag_ids(self) -> tuple[str, ...]:
        return tuple(gang.dag_id for gang in self.gangs)


WAITING_AND_FAST = {"gang_waiting": ClusterSpec("demo", None), "gang_fast": ClusterSpec("small", None)}
"""Clusters of :func:`waiting_and_fast` DAGs."""


def waiting_and_fast(file_name: str, description: str, waiting: str, success: str, success_run_seconds: int) -> Dags:
    """A gang of 8 that waits on ``gang_waiting`` and a gang of 2 that runs on ``gang_fast``."""
    return Dags(
        file_name,
        description,
        (
            GangDag(waiting, "gang_waiting", 8, "us-central1-a", 3600),
            GangDag(success, "gang_fast", 2, None, success_run_seconds),
        ),
    )


def write_dags(directory: Path, dags: Dags) -> Path:
    """Write ``dags`` to ``directory/dags/<file_name>``; return the DAGs folder."""
    folder = directory / "dags"
    folder.mkdir()
    gangs = repr(
        tuple(
            (gang.dag_id, gang.conn_id, gang.size, gang.zone, gang.run_seconds, gang.retries, gang.deferrable)
            for gang in dags.gangs
        )
    )
    (folder / dags.file_name).write_text(textwrap.dedent(DAGS.substitute(description=dags.description, gangs=gangs)))
    return folder


@dataclass
class Setup:
    """A running environment: Airflow, the clusters by connection id, the temporary directory."""

    airflow: Airflow
    clusters: dict[str, ClusterHarness]
    directory: Path

    def describe(self) -> str:
        """The tails of every component's and cluster's log: for failure reports (``conftest.py``)."""
        return "\n".join(
            [
                self.airflow.describe(),
                *(f"--- cluster {name}:\n{cluster.describe()}" for name, cluster in self.clusters.items()),
            ]
        )


@contextmanager
def running_airflow(
    prefix: str, dags: Dags, clusters: Mapping[str, ClusterSpec], config: Mapping[str, str] | None = None
) -> Iterator[Setup]:
    """The clusters and Airflow (with ``config``: extra ``AIRFLOW__SECTION__KEY`` variables), healthy,
    logged in, the DAGs parsed, in a temporary directory named ``prefix...``; everything started is
    stopped on exit (last started first), also on failure."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    stopping: list[Any] = []
    try:
        folder = write_dags(directory, dags)
        started: dict[str, ClusterHarness] = {}
        for conn_id, spec in clusters.items():
            started[conn_id] = start_cluster(directory, conn_id, spec)
            stopping.append(started[conn_id])
        airflow = start_airflow(
            directory, folder, {conn_id: connection_json(cluster) for conn_id, cluster in started.items()}, config
        )
        stopping.append(airflow)
        airflow.wait_ready(dags.dag_ids)
        yield Setup(airflow, started, directory)
    finally:
        for running in reversed(stopping):
            running.stop()
        if os.environ.get("GANG_STANDALONE_KEEP") == "1":
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def trigger(airflow: Airflow, dag_id: str) -> str:
    """Start a run of ``dag_id``; return its run id."""
    run = airflow.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None})
    return str(run["dag_run_id"])


def train_task(airflow: Airflow, dag_id: str, run_id: str) -> dict[str, Any]:
    """The ``train`` task instance of the run."""
    answer: dict[str, Any] = airflow.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/train")
    return answer


def settled(airflow: Airflow, runs: Mapping[str, str]) -> bool:
    """Every run (run id -> DAG id) has its ``train`` task finished, or deferred with the scheduler
    past the executor event of each worker run that deferred it (see the module docstring)."""
    scheduler = airflow.components["scheduler"].log()
    for run_id, dag_id in runs.items():
        task = train_task(airflow, dag_id, run_id)
        if task["state"] in FINISHED:
            continue
        deferrals = airflow.task_log(run_id).count(DEFERRED_LINE)
        if task["state"] != "deferred" or scheduler.count(EXECUTOR_EVENT.format(dag_id)) < deferrals:
            return False
    return True


def drive_until_finished(
    airflow: Airflow, cluster: ClusterHarness, runs: Mapping[str, str], step_seconds: float = 30.0, steps: int = 40
) -> None:
    """Move ``cluster``'s clock ``step_seconds`` at a time, each step once Airflow has
    :func:`settled`, until every run's ``train`` task has finished; fail after ``steps`` steps.

    After each step the triggers get ``REACTION_SECONDS`` of real time to see what the step changed
    and fire (a fired trigger moves its task out of ``deferred`` at once), so the clock never runs on
    past a booking while a resumed task is still being scheduled."""
    for _ in range(steps):
        eventually(lambda: settled(airflow, runs), timeout=240, what="deferrals drained by the scheduler", interval=0.5)
        if all(train_task(airflow, dag_id, run_id)["state"] in FINISHED for run_id, dag_id in runs.items()):
            return
        cluster.advance(step_seconds, timeout=120)
        time.sleep(REACTION_SECONDS)
    states = {run_id: train_task(airflow, dag_id, run_id)["state"] for run_id, dag_id in runs.items()}
    raise AssertionError(f"not finished after {steps} steps of {step_seconds} s: {states}")

"""Run one example DAG of a DAGs folder with ``dag.test()`` against the cluster ``kubernetes_default``
points at, its wall-clock limits scaled to the simulated cluster's speed.

The DAGs folder is always passed in (``make demo`` passes the repository's ``dags/``): nothing here
finds it from where this module lies.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

from demo.cluster import free_port
from gang_sim.world.scenario import Scenario, load_scenario

DEMO_DAG_ID = "gang_nightly_training"
DEMO_TIME_SCALE = 15.0
"""Fast enough for a short demo, slow enough that zone A's 10-minute stock-out (40 s here) outlasts
try 1's 5-minute wait (20 s) even when Airflow's wall-clock start-up takes 20 s on a loaded machine."""
TRAINER_IMAGE_FOR_DEMO = "ghcr.io/example/ddp-trainer:2026.11"
"""The example DAG's image; the demo cluster runs it as local processes (needs torch installed)."""


def demo_scenario() -> Scenario:
    """The ``demo`` scenario, with the example's trainer image run as local processes too."""
    scenario = load_scenario("demo")
    return dataclasses.replace(scenario, local_process_images=(*scenario.local_process_images, TRAINER_IMAGE_FOR_DEMO))


def _scaled(task: Any, time_scale: float) -> None:
    """Shrink the task's wall-clock limits by the cluster's time scale, so "5 minutes" stays 5 simulated minutes."""
    for name in ("reservation_timeout", "startup_timeout", "run_timeout", "start_by"):
        value = getattr(task, name)
        if value is not None:
            setattr(task, name, value / time_scale)
    task.retry_delay = timedelta(0)


def run_example_dag(
    dags_folder: Path, time_scale: float = DEMO_TIME_SCALE, dag_id: str = DEMO_DAG_ID, task_id: str = "train"
) -> tuple[str, dict[str, Any] | None]:
    """Run the DAG ``dag_id`` of ``dags_folder`` (its one gang task ``task_id``) once with ``dag.test()``
    against the cluster ``kubernetes_default`` points at.

    The task's wall-clock limits are divided by ``time_scale`` so they keep their meaning on the
    faster simulated cluster. Returns the task state and its XCom summary (``None`` if it failed).
    """
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(str(dags_folder)).get_dag(dag_id)
    if dag is None:
        raise LookupError(f"DAG {dag_id} not found in {dags_folder}")
    task = dag.get_task(task_id)
    _scaled(task, time_scale)
    task.master_port = free_port()  # every member runs on this machine: do not assume 29500 is free
    # A nightly run starts at its data interval end (02:00); this one starts now. Count the scaled
    # start_by window from now, so "4 hours after 02:00" keeps its meaning for a run at any hour.
    import pendulum  # Airflow's timetables take pendulum times
    from airflow.serialization.encoders import coerce_to_core_timetable  # what dag.test() uses

    now = pendulum.now("UTC")
    if task.start_by is not None:
        interval_end = coerce_to_core_timetable(dag.timetable).infer_manual_data_interval(run_after=now).end
        task.start_by += now - interval_end
    return _outcome(dag.test(logical_date=now), task_id)


def _outcome(dag_run: Any, task_id: str) -> tuple[str, dict[str, Any] | None]:
    """The gang task's state and its summary: a ``@task.gang`` task's XCom ``gang_summary`` (its
    ``return_value`` is rank 0's), else the operator's ``return_value``; ``None`` if it failed."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_provider_gang.links import GANG_SUMMARY_XCOM_KEY, SUMMARY_XCOM_KEY

    with create_session() as session:
        ti = session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_run.dag_id,
                TaskInstance.run_id == dag_run.run_id,
                TaskInstance.task_id == task_id,
            )
        ).one()
        for key in (GANG_SUMMARY_XCOM_KEY, SUMMARY_XCOM_KEY):
            query = XComModel.get_many(run_id=dag_run.run_id, key=key, task_ids=task_id, dag_ids=dag_run.dag_id)
            row = session.scalars(query).first()
            if row is not None:
                return str(ti.state), XComModel.deserialize_value(row)
        return str(ti.state), None

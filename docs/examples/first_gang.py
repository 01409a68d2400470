"""The quick start's first DAG: two members of a public Python image print their rank.

On the emulator (``gang-sim serve --scenario demo``) ``python:*`` images run as local processes, so both
members really run and rank 0's line is copied into the task log. ``tests/e2e/test_first_dag.py`` runs
this file with ``airflow dags test`` against ``gang-sim serve``; ``tests/release`` runs it from the
installed wheel.
"""

from __future__ import annotations

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

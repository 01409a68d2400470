"""The README's first DAG: a TaskFlow function run on 3 ranks by ``@task.gang``, rank 0's return value
handed to the next task.

The decorated function runs inside every member container (``image``), with the rank environment the
operator sets (``GANG_RANK``, ``GANG_SIZE``, ...); rank 0's return value becomes the task's XCom, the
other ranks' return values are ignored. On the emulator ``python:*`` images run as local processes.
``tests/e2e/test_first_dag.py`` runs this file with ``airflow dags test`` against ``gang-sim serve``.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

with DAG(dag_id="first_gang_taskflow", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task.gang(image="python:3.11-slim", size=3, gpus=1, cpu="500m", memory="512Mi", reservation_timeout=300)
    def train(steps: int) -> dict[str, int]:
        import os

        rank, size = int(os.environ["GANG_RANK"]), int(os.environ["GANG_SIZE"])
        print(f"rank {rank} of {size} trains {steps} steps")
        return {"rank": rank, "size": size, "steps": steps}

    @task
    def report(result: dict[str, int]) -> None:
        print("rank 0 returned", result)

    report(train(steps=100))

"""TaskFlow: ``@task.gang`` runs a Python function on every member of a gang, all started together.

The function runs in each member's container (``image``), from its source: import what it uses inside
it. ``distributed="torch"`` gives every member its rank environment (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``), as ``GangTrainingOperator`` does; every argument of the operator
works on the decorator (reservation modes, ``fallbacks``, ``start_by``, ``checkpoint``...).

Rank 0's return value becomes the task's XCom ``return_value`` - here a dict that ``report`` receives;
the other ranks' return values are ignored. It travels as one JSON line of rank 0's log: at most 1 MiB,
so return metrics or the location of what the run wrote, not the model.

The members run the public ``python:3.11-slim`` image; on the emulator (``gang-sim serve --scenario
small``) ``python:*`` images run as local processes.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

with DAG(
    dag_id="gang_task_decorator",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["gang", "example", "taskflow"],
    doc_md=__doc__,
) as dag:

    @task.gang(
        image="python:3.11-slim",
        size=3,
        distributed="torch",
        reservation="gates",  # members created up front behind a scheduling gate, released together
        reservation_timeout=300,  # seconds, or a timedelta
        startup_timeout=300,
        run_timeout=600,
    )
    def train(epochs: int) -> dict[str, float]:
        import os

        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        loss = 1.0
        for _ in range(epochs):  # stands in for a training loop
            loss *= 0.5
        print(f"rank {rank} of {world_size}: loss {loss}")
        return {"rank": rank, "world_size": world_size, "loss": loss}

    @task
    def report(metrics: dict[str, float]) -> str:
        return f"{metrics['world_size']} ranks trained; rank 0's loss is {metrics['loss']}"

    report(train(epochs=3))

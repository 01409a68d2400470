"""A multi-process JAX job: three processes started together, one per member, talking over gloo.

``distributed="jax"`` gives each member ``JAX_COORDINATOR_ADDRESS`` (rank 0 behind the gang's
headless Service), ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``; the trainer passes them to
``jax.distributed.initialize``. All three must start: a JAX job that starts two of three processes
blocks in ``initialize`` until it times out, which is exactly the half-started job gang scheduling
prevents. Rank 0 prints the collectives' result as one JSON line into the task log.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator

TRAINER = Path(__file__).resolve().parent / "trainer" / "jax_train.py"

with DAG(
    dag_id="gang_jax_job",
    schedule="0 4 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
    tags=["gang", "example", "jax"],
    doc_md=__doc__,
) as dag:
    GangTrainingOperator(
        task_id="collectives",
        image="ghcr.io/example/jax-trainer:2026.11",
        command=["python", "-u", str(TRAINER)],
        size=3,
        cpu="1",
        distributed="jax",
        reservation="provisioning_request",
        reservation_timeout=timedelta(minutes=15),
        startup_timeout=timedelta(minutes=10),
        run_timeout=timedelta(minutes=30),
        log_ranks=[0],
        deferrable=True,
    )

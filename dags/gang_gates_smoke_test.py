"""A GPU smoke test in gates mode: every member created at once, held back, released together.

With ``reservation="gates"`` the members are created up front with a scheduling gate
(``spec.schedulingGates``, KEP-3521): the scheduler ignores them, so none takes a GPU. The gang's
ProvisioningRequest asks the cluster autoscaler for room for all of them; once it is provisioned the
provider removes every gate in one pass and the members start together. Useful when something must
see the pods before they run (admission webhooks, quota checks, image pre-pulls).

The members run the public ``python:3.11-slim`` image and print their rank; rank 0's output is in
the task log. On the emulator (``gang-sim serve --scenario demo`` or ``small``) ``python:*`` images
run as local processes.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator

with DAG(
    dag_id="gang_gates_smoke_test",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["gang", "example", "gates"],
    doc_md=__doc__,
) as dag:
    GangTrainingOperator(
        task_id="smoke_test",
        image="python:3.11-slim",
        command=["python", "-c", "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])"],
        size=2,
        gpus=1,
        distributed="torch",
        reservation="gates",
        reservation_timeout=300,  # seconds
        startup_timeout=300,
        run_timeout=600,
        log_ranks="all",
        deferrable=True,
    )

"""Use a GKE specific reservation first, and leave it when it cannot hold the gang.

``use_reservation="l4-reservation"`` makes every member require the node label
``cloud.google.com/reservation-name=l4-reservation`` (the reservation's VMs), so the gang's
ProvisioningRequest asks for reserved capacity only - GPUs already paid for. When the reservation
is full or too small (the try ends ``capacity_not_found`` or ``deadline``), the ladder's
``LeaveReservation()`` makes the next try ask for ordinary on-demand capacity instead; set
``retries`` to at least the ladder's length so that try can run.

The members run the public ``python:3.11-slim`` image and print their rank and the node they run
on. On the emulator, the ``reserved`` scenario (``gang-sim serve --scenario reserved``) has a
2-node reservation ``l4-reservation`` of 4 L4 GPUs per node, and ``python:*`` images run as local
processes.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import LeaveReservation

with DAG(
    dag_id="gang_reserved_capacity",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["gang", "example", "reservation"],
    doc_md=__doc__,
) as dag:
    GangTrainingOperator(
        task_id="train",
        image="python:3.11-slim",
        command=["python", "-c", "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])"],
        size=2,
        gpus=4,  # one reserved node (4 L4 GPUs) per member
        distributed="torch",
        use_reservation="l4-reservation",
        fallbacks=[LeaveReservation()],
        retries=1,
        retry_delay=timedelta(seconds=0),
        reservation_timeout=timedelta(minutes=10),
        startup_timeout=timedelta(minutes=10),
        deferrable=True,
    )

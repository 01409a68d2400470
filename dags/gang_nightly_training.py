"""Nightly distributed training that starts all-or-nothing.

Every night at 02:00 UTC eight single-GPU members train together with PyTorch DDP. Nothing starts
until capacity for all eight is reserved: a half-started job would hold GPUs while it waits for the
rest, which is the waste this provider exists to prevent.

- Try 1 asks the cluster autoscaler (a ProvisioningRequest, best-effort atomic scale-up) for the
  whole gang in zone us-central1-a, and waits in the triggerer - no worker slot held - for at most
  5 minutes: a zone that cannot find 8 GPUs by then is stocked out tonight.
- Try 2 withdraws zone A's request and asks in us-central1-b; try 3 also shrinks the gang to 4
  members. The trainer reads GANG_ORIGINAL_SIZE and accumulates gradients, so the global batch
  stays the same.
- If the gang has not started 4 hours after the data interval ends (06:00), the task fails without
  retrying instead of queueing behind tomorrow's run.

The XCom summary says what was reserved, which step ran, and the GPU-hours reserved, used and idle.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import OtherZone, ShrinkTo

# In production the trainer lives in the image; here it ships next to the DAG so the simulated
# cluster (``make demo``) can run it as local processes.
TRAINER = Path(__file__).resolve().parent / "trainer" / "ddp_train.py"
TRAINER_IMAGE = "ghcr.io/example/ddp-trainer:2026.11"

with DAG(
    dag_id="gang_nightly_training",
    schedule="0 2 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},  # one retry per fallback step
    tags=["gang", "example"],
    doc_md=__doc__,
) as dag:
    GangTrainingOperator(
        task_id="train",
        image=TRAINER_IMAGE,
        command=["python", "-u", str(TRAINER)],
        env={"TRAINING_RUN": "{{ run_id }}"},  # templated: rendered per run
        size=8,
        min_size=4,
        gpus=1,
        cpu="2",
        memory="8Gi",
        distributed="torch",  # RANK, WORLD_SIZE, MASTER_ADDR/PORT and a headless Service
        reservation="provisioning_request",
        zone="us-central1-a",
        strict_zone=True,
        reservation_timeout=timedelta(minutes=5),
        startup_timeout=timedelta(minutes=10),
        run_timeout=timedelta(hours=3),
        start_by=timedelta(hours=4),
        fallbacks=[OtherZone("us-central1-b"), ShrinkTo(4)],
        log_ranks=[0],
        deferrable=True,
    )

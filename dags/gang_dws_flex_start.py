"""Fine-tuning on flex-start capacity (GKE Dynamic Workload Scheduler), another class if it is revoked.

GKE's Dynamic Workload Scheduler hands out GPUs for at most ``maxRunDurationSeconds``: the
ProvisioningRequest of class ``queued-provisioning.gke.io`` waits in a queue until the whole gang's
nodes can be created together, then the nodes live for that long. The run here needs about an hour,
so it asks for two.

- Try 1 asks for flex-start capacity and waits up to 30 minutes in the triggerer (no worker slot).
- If the capacity is revoked (``CapacityRevoked``: the run outlived ``maxRunDurationSeconds``, or
  the nodes were reclaimed) or never came, try 2 asks the cluster autoscaler for an atomic scale-up
  of ordinary nodes instead (``OtherProvisioningClass`` answers ``capacity_revoked`` by default).

On the emulator: ``gang-sim serve --scenario dws`` has a queued-provisioning node pool and an
ordinary one (docs/kueue-and-dws.md says how to create the same node pool on GKE).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import OtherProvisioningClass

TRAINER = Path(__file__).resolve().parent / "trainer" / "ddp_train.py"

with DAG(
    dag_id="gang_dws_flex_start",
    schedule="0 3 * * 6",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
    tags=["gang", "example", "dws"],
    doc_md=__doc__,
) as dag:
    GangTrainingOperator(
        task_id="fine_tune",
        image="ghcr.io/example/ddp-trainer:2026.11",
        command=["python", "-u", str(TRAINER)],
        size=2,
        gpus=1,
        cpu="2",
        memory="8Gi",
        distributed="torch",
        reservation="provisioning_request",
        provisioning_class="queued-provisioning.gke.io",
        provisioning_parameters={"maxRunDurationSeconds": "7200"},
        reservation_timeout=timedelta(minutes=30),
        startup_timeout=timedelta(minutes=10),
        run_timeout=timedelta(hours=2),
        fallbacks=[OtherProvisioningClass("best-effort-atomic-scale-up.autoscaling.x-k8s.io")],
        deferrable=True,
    )

"""Team training through Kueue: quota first, another team's queue second, fewer members if need be.

Team A trains a DDP model every night on its own Kueue LocalQueue ``team-a``. The Job is created
suspended; Kueue admits it when the ClusterQueue behind ``team-a`` has quota for the whole gang, and
only then are the members created - never half of them.

- ``min_size=2`` allows Kueue's partial admission: when quota for all four members is not there,
  Kueue may admit two or three. The provider then tells DDP the admitted world size (``WORLD_SIZE``
  comes from the admitted count, not the requested one) and ``GANG_ORIGINAL_SIZE`` keeps the global
  batch through gradient accumulation.
- If ``team-a`` cannot admit the gang within 10 minutes (or the Workload is preempted or evicted),
  the next try asks ``team-b``'s queue, which borrows from the same cohort.

On the emulator: ``gang-sim serve --scenario kueue`` creates the ResourceFlavors, the two
ClusterQueues in one cohort and the LocalQueues ``team-a`` and ``team-b`` (docs/kueue-and-dws.md
says how to create the same on GKE).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import OtherQueue

# In production the trainer lives in the image; here it ships next to the DAG so the emulator can
# run it as local processes.
TRAINER = Path(__file__).resolve().parent / "trainer" / "ddp_train.py"

with DAG(
    dag_id="gang_kueue_team_training",
    schedule="30 1 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
    tags=["gang", "example", "kueue"],
    doc_md=__doc__,
) as dag:
    GangTrainingOperator(
        task_id="train",
        image="ghcr.io/example/ddp-trainer:2026.11",
        command=["python", "-u", str(TRAINER)],
        size=4,
        min_size=2,
        gpus=1,
        cpu="2",
        memory="8Gi",
        distributed="torch",
        reservation="kueue",
        kueue_queue="team-a",
        reservation_timeout=timedelta(minutes=10),
        startup_timeout=timedelta(minutes=10),
        run_timeout=timedelta(hours=2),
        fallbacks=[OtherQueue("team-b")],
        deferrable=True,
    )

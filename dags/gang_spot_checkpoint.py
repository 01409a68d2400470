"""Train on spot capacity, checkpoint, and resume where a reclaimed try stopped.

``spot=True`` places every member on spot nodes (GKE: node selector and toleration
``cloud.google.com/gke-spot``). Spot nodes are cheap and can be reclaimed at any moment, so the job
checkpoints: ``checkpoint=...`` gives every try of the DAG run the same location
(``GANG_CHECKPOINT_DIR``), and rank 0 of ``trainer/ddp_train.py`` saves there every
``--checkpoint-every`` steps and on SIGTERM (the node's shutdown notice), and reports each saved step
through its termination message. When a node is reclaimed the try ends ``spot_preempted``; the
ladder's ``RetryAsIs(times=2)`` answers it with a try on spot again, up to twice, then ``OnDemand()``
leaves spot. Each later try gets ``GANG_RESUME=1`` and ``GANG_RESUME_STEP`` and continues from the
step reported; the summary's ``checkpoint`` says how many GPU-hours resuming saved.

The location here is a local path, which the emulator's local-process members share; on a real
cluster use a bucket (``gs://...``, with a storage client in the trainer) or
``airflow_provider_gang.reservation.checkpoint.PersistentVolumeCheckpoint`` (a claim mounted into every
member). On the emulator, the ``reserved`` scenario (``gang-sim serve --scenario reserved``) has a
spot L4 pool; ``POST /_sim/preemptions`` reclaims a node.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import OnDemand, RetryAsIs

TRAINER = Path(__file__).resolve().parent / "trainer" / "ddp_train.py"

with DAG(
    dag_id="gang_spot_checkpoint",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["gang", "example", "spot", "checkpoint"],
    doc_md=__doc__,
) as dag:
    GangTrainingOperator(
        task_id="train",
        image="ghcr.io/example/ddp-trainer:2026.11",
        command=["python", "-u", str(TRAINER), "--steps", "20", "--checkpoint-every", "5"],
        size=2,
        gpus=1,
        distributed="torch",
        spot=True,
        checkpoint="/tmp/gang-checkpoints/{{ dag.dag_id }}/{{ run_id }}",
        fallbacks=[RetryAsIs(times=2), OnDemand()],
        retries=3,
        retry_delay=timedelta(seconds=0),
        reservation_timeout=timedelta(minutes=10),
        startup_timeout=timedelta(minutes=10),
        deferrable=True,
    )

"""Four ranks in one rack, or none: a topology-aware gang through Kueue's Topology Aware Scheduling.

GPU clusters are blocks of racks of hosts; collectives inside a rack are far faster than across
blocks. ``required_topology`` names the node label of the domain every member must share - here
GKE's ``cloud.google.com/gce-topology-subblock`` (a rack). In ``kueue`` mode the Job's pod template
asks Kueue for it (``kueue.x-k8s.io/podset-required-topology``): Kueue admits the gang only into a
rack that holds all four members, and gives consecutive ranks the same host. Should no rack hold
the gang until ``reservation_timeout``, ``LoosenTopology`` lets the next try take any rack of one
block (``cloud.google.com/gce-topology-block``). Where each rank ran is in the task log, the Gang
view and the try's record.

The queue ``tas`` needs a flavor with a ``Topology`` that has the rack level; the precheck refuses
one without (docs/topology.md). On the emulator: ``gang-sim serve --scenario topology``, whose one
rack with room for four is ``rack-b1``. The members run the public ``python:3.11-slim`` image.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import LoosenTopology

RACK = "cloud.google.com/gce-topology-subblock"
BLOCK = "cloud.google.com/gce-topology-block"

with DAG(
    dag_id="gang_topology_rack",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["gang", "example", "topology", "kueue"],
    doc_md=__doc__,
) as dag:
    GangTrainingOperator(
        task_id="train",
        image="python:3.11-slim",
        command=["python", "-c", "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])"],
        size=4,
        gpus=1,
        cpu="1",
        distributed="torch",
        reservation="kueue",
        kueue_queue="tas",
        required_topology=RACK,
        fallbacks=[LoosenTopology(BLOCK)],
        retries=1,
        reservation_timeout=600,  # seconds
        startup_timeout=300,
        log_ranks="all",
        deferrable=True,
    )

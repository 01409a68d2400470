"""A GPU smoke test on Kubernetes' own gang scheduling (``reservation="workload"``, KEP-4671).

The provider creates the gang's PodGroup (``scheduling.k8s.io/v1beta1``) with a gang policy of
``minCount`` = ``size``, then every member linked to it (``spec.schedulingGroup.podGroupName``). The
kube-scheduler places them all in one scheduling cycle or none: no member holds a GPU while its peers
wait, and no other pod can take a node between one member's binding and the next. No
ProvisioningRequest is made: the gang runs on the nodes the cluster has (or grows by ordinary
scale-up). Needs Kubernetes 1.37+ with the ``GenericWorkload`` feature gate and
``scheduling.k8s.io/v1beta1`` served (docs/operators/workload.md); the
precheck refuses another cluster and names them.

The members run the public ``python:3.11-slim`` image and print their rank; every rank's output is in
the task log. On the emulator (``gang-sim serve --scenario small``) ``python:*`` images run as local
processes.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator

with DAG(
    dag_id="gang_workload_api_smoke_test",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["gang", "example", "workload"],
    doc_md=__doc__,
) as dag:
    GangTrainingOperator(
        task_id="smoke_test",
        image="python:3.11-slim",
        command=["python", "-c", "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])"],
        size=2,
        gpus=1,
        distributed="torch",
        reservation="workload",
        reservation_timeout=600,  # seconds
        startup_timeout=300,
        run_timeout=600,
        log_ranks="all",
        deferrable=True,
    )

"""Small DAG builders shared by the end-to-end tests."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation import naming

GANG_KINDS = (
    "v1/pods",
    "v1/configmaps",
    "v1/podtemplates",
    "v1/services",
    "autoscaling.x-k8s.io/v1/provisioningrequests",
)
"""The kinds of a gang's objects in provisioning_request and gates modes."""
SIM_RUN = "sim.gang.dev/run-seconds"
SIM_START = "sim.gang.dev/start-seconds"
SIM_EXIT = "sim.gang.dev/exit-code"


def simulated_pod(run_seconds: float = 30, exit_code: int = 0) -> dict[str, Any]:
    """A member template for the simulated kubelet: runs ``run_seconds`` simulated seconds, then exits."""
    return {
        "metadata": {"annotations": {SIM_RUN: str(run_seconds), SIM_EXIT: str(exit_code)}},
        "spec": {"containers": [{"name": "trainer", "image": "trainer:sim", "command": ["train"]}]},
    }


def gang_objects(cluster: Any, gang: str | None = None) -> dict[str, list[str]]:
    """The names of gang ``gang``'s objects (``None``: of every gang) left on ``cluster``, by kind."""
    selector = naming.GANG_LABEL if gang is None else f"{naming.GANG_LABEL}={gang}"
    found = {
        kind: [item["metadata"]["name"] for item in cluster.objects(kind, label_selector=selector)]
        for kind in GANG_KINDS
    }
    return {kind: names for kind, names in found.items() if names}


def gang_dag(dag_id: str, *, retries: int = 0, **operator_arguments: Any) -> Any:
    """A one-task DAG running ``GangTrainingOperator(task_id="train", **operator_arguments)``."""
    from airflow.sdk import DAG

    with DAG(dag_id=dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:
        GangTrainingOperator(task_id="train", retries=retries, retry_delay=timedelta(seconds=0), **operator_arguments)
    return dag


def run_dag_test(dag: Any, **kwargs: Any) -> Any:
    """``dag.test()`` for a DAG object built in a test: serialize it into the database first."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager

    try:
        from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    except ImportError:  # Airflow 3.1 (moved in 3.2)
        from airflow.models.dagbag import DagBag, sync_bag_to_db  # type: ignore[no-redef]

    DagBundlesManager().sync_bundles_to_db()
    bag = DagBag(collect_dags=False)
    bag.bag_dag(dag)
    sync_bag_to_db(bag, "dags-folder", None)
    return dag.test(**kwargs)


def task_instance(dag_run: Any) -> Any:
    """The ``train`` task instance of a finished ``dag.test()`` run."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_run.dag_id,
                TaskInstance.run_id == dag_run.run_id,
                TaskInstance.task_id == "train",
            )
        ).one()


def summary_of(dag_run: Any) -> dict[str, Any]:
    """The XCom summary (``return_value``) of the ``train`` task."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=dag_run.run_id, key="return_value", task_ids="train", dag_ids=dag_run.dag_id)
        ).first()
        assert row is not None, "no summary XCom"
        return dict(XComModel.deserialize_value(row))

"""Airflow-only fixtures for end-to-end tests: the metadata database, a simulated cluster, and a
runner for DAGs defined inside tests (``dag.test()`` needs them serialized first; see
``DAG.test`` in apache/airflow ``task-sdk/src/airflow/sdk/definitions/dag.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from demo.cluster import simulated_cluster
from gang_sim.testing import ClusterHarness


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> None:
    from airflow.utils import db

    db.initdb()


@pytest.fixture
def cluster_factory() -> Iterator[Callable[..., ClusterHarness]]:
    """Start a simulated cluster (``scenario``, ``time_scale``); every one started is stopped after the test."""
    started: list[Any] = []

    def start(scenario: Any = "small", *, time_scale: float | None = 60.0, **options: Any) -> ClusterHarness:
        context = simulated_cluster(scenario, time_scale=time_scale, **options)
        cluster = context.__enter__()
        started.append(context)
        return cluster

    yield start
    for context in reversed(started):
        context.__exit__(None, None, None)


@pytest.fixture
def run_dag() -> Callable[..., Any]:
    """``dag.test()`` for a DAG object built in a test: serialize it into the database first."""

    def run(dag: Any, **kwargs: Any) -> Any:
        from airflow.dag_processing.bundles.manager import DagBundlesManager
        from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

        DagBundlesManager().sync_bundles_to_db()
        bag = DagBag(collect_dags=False)
        bag.bag_dag(dag)
        sync_bag_to_db(bag, "dags-folder", None)
        return dag.test(**kwargs)

    return run

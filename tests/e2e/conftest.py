"""Airflow-only fixtures for end-to-end tests: the metadata database, a simulated cluster, and a
runner for DAGs defined inside tests (``dag.test()`` needs them serialized first; see
``DAG.test`` in apache/airflow ``task-sdk/src/airflow/sdk/definitions/dag.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from demo.cluster import simulated_cluster
from gang_sim.testing import ClusterHarness
from tests.cluster_time import on_cluster_time
from tests.e2e.gang_dags import run_dag_test


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> None:
    from airflow.utils import db

    db.initdb()


@pytest.fixture
def cluster_factory() -> Iterator[Callable[..., ClusterHarness]]:
    """Start a simulated cluster (``scenario``, ``time_scale``); every one started is stopped after the test.

    ``cluster_time=True`` runs the operator and its triggers on the cluster's clock
    (``tests.cluster_time``): their timeouts are simulated seconds, as the controllers' delays are.
    GPU-seconds come from the emulator's wall-clock object timestamps, so a test that checks them
    keeps the system clock (the default).
    """
    with contextlib.ExitStack() as started:

        def start(
            scenario: Any = "small", *, time_scale: float | None = 60.0, cluster_time: bool = False, **options: Any
        ) -> ClusterHarness:
            cluster = started.enter_context(simulated_cluster(scenario, time_scale=time_scale, **options))
            if cluster_time:
                started.enter_context(on_cluster_time(cluster.clock))
            return cluster

        yield start


@pytest.fixture
def run_dag() -> Callable[..., Any]:
    """``dag.test()`` for a DAG object built in a test: serialize it into the database first."""

    return run_dag_test

"""The end-to-end fixtures (``tests/e2e/conftest.py``) for the tests of the supported Airflow releases,
which also run in the per-release venvs of ``make versions``."""

from __future__ import annotations

from tests.e2e.conftest import airflow_db, cluster_factory, run_dag

__all__ = ["airflow_db", "cluster_factory", "run_dag"]

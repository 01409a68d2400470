"""Shared test set-up.

Airflow reads its configuration at import time, so the temporary ``AIRFLOW_HOME`` and the settings
below are put in the environment before anything imports ``airflow``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import task_state_store

_REPOSITORY = Path(__file__).resolve().parents[1]

# The home this conftest made, so that each pytest-xdist worker (a process that inherits the controller's
# environment) makes its own: two workers creating Airflow's sqlite tables in one file at once fail with
# "table ... already exists". A home the user set is left as it is.
_OWN_HOME = "GANG_TESTS_OWN_AIRFLOW_HOME"
if "AIRFLOW_HOME" not in os.environ or os.environ.get(_OWN_HOME) == os.environ["AIRFLOW_HOME"]:
    _worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    os.environ["AIRFLOW_HOME"] = os.environ[_OWN_HOME] = tempfile.mkdtemp(prefix=f"gang-airflow-home-{_worker}-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)  # ours: remove it after the run
os.environ.update(
    {
        "AIRFLOW__CORE__DAGS_FOLDER": str(_REPOSITORY / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    }
)


pytest_plugins = ["gang_sim.testing.pytest_plugin"]
"""The emulator's fixtures (``emulator``, ``sim_cluster``), loaded after the environment above is set."""


@pytest.fixture(autouse=True)
def _fresh_task_state_stores() -> Iterator[None]:
    """Every test starts with empty fake task state stores (``tests.task_state_store``)."""
    yield
    task_state_store.forget_all()

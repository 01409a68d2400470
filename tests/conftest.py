"""Shared test set-up.

Airflow reads its configuration at import time, so the temporary ``AIRFLOW_HOME`` and the settings
below are put in the environment before anything imports ``airflow``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

_REPOSITORY = Path(__file__).resolve().parents[1]

if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="gang-airflow-home-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)  # ours: remove it after the run
os.environ.update(
    {
        "AIRFLOW__CORE__DAGS_FOLDER": str(_REPOSITORY / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    }
)


pytest_plugins = ["airflow_provider_gang.sim.testing.pytest_plugin"]
"""The emulator's fixtures (``emulator``, ``sim_cluster``), loaded after the environment above is set."""

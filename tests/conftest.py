"""Shared test set-up.

Airflow reads its configuration at import time, so the temporary ``AIRFLOW_HOME`` and the settings
below are put in the environment before anything imports ``airflow``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_REPOSITORY = Path(__file__).resolve().parents[1]

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="gang-airflow-home-"))
os.environ.update(
    {
        "AIRFLOW__CORE__DAGS_FOLDER": str(_REPOSITORY / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
    }
)

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


# --- The Kubernetes API emulator (airflow_provider_gang.sim), one per test on a free port. -----------
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from airflow_provider_gang.sim.testing.harness import EmulatorHarness  # noqa: E402


@pytest.fixture
def emulator() -> Iterator[EmulatorHarness]:
    """A started emulator (thread + own loop): ``.url``, ``.kubeconfig_path``, ``.token``, ``.store``,
    ``.run(fn)`` to touch the store on the server loop, ``.emulator`` for hooks/faults/metrics."""
    with EmulatorHarness(seed=0) as harness:
        yield harness

"""``python -m demo --dags-folder dags`` (what ``make demo`` runs): the example nightly DAG once on the
``demo`` scenario, then what happened."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

from demo.cluster import simulated_cluster
from demo.report import report
from demo.runner import DEMO_DAG_ID, DEMO_TIME_SCALE, demo_scenario, run_example_dag


def _prepare_environment(home: Path, dags_folder: Path) -> None:
    """Airflow reads its configuration at import: set it (and ``PATH``, for the local processes) first."""
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # The demo prints its own report; GANG_DEMO_LOG_LEVEL=INFO shows the task log as well.
            "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("GANG_DEMO_LOG_LEVEL", "CRITICAL"),
            # The members run as local processes of the emulator; "python" must be this interpreter.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )


def _quiet_known_noise() -> None:
    """Keep the demo's output readable: library deprecation warnings are not news."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")


def main(arguments: list[str] | None = None) -> int:
    """Run the example DAG once on the ``demo`` scenario and print what happened."""
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument("--dags-folder", type=Path, required=True, help="the folder holding the example DAGs")
    dags_folder = parser.parse_args(arguments).dags_folder.resolve()
    if importlib.util.find_spec("torch") is None:
        print("The example trainer needs PyTorch: run `make test` first (it installs the test extra, torch included).")
        return 2
    with tempfile.TemporaryDirectory(prefix="gang-demo-") as home:
        _prepare_environment(Path(home), dags_folder)
        _quiet_known_noise()
        from airflow.utils import db

        db.initdb()  # before the cluster starts: its scenario's clock runs from its start
        scenario = demo_scenario()
        print(f"Starting the Kubernetes emulator with the 'demo' scenario: {scenario.description}")
        with simulated_cluster(scenario, time_scale=DEMO_TIME_SCALE) as cluster:
            print(f"Emulator at {cluster.url}; Airflow home {home}")
            print(f"Running {DEMO_DAG_ID} with dag.test() ...")
            started = time.monotonic()
            state, summary = run_example_dag(dags_folder)
            print("\n".join(report(state, summary, time.monotonic() - started)))
            print(f"Pods left in the cluster: {len(cluster.objects('v1/pods'))}")
            return 0 if state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())

"""A simulated cluster for the demo and the end-to-end tests: the emulator plus its controllers.

:func:`simulated_cluster` starts the Kubernetes API emulator on a free port of 127.0.0.1 in a
background thread with the simulated control plane of a scenario attached
(``gang_sim.controllers.cluster_harness``, what ``gang-sim serve --scenario`` runs) and points an
Airflow connection of type ``kubernetes`` at the kubeconfig the emulator writes, through an
``AIRFLOW_CONN_<ID>`` environment variable (Airflow reads connections from the environment first).

Simulated controller time runs ``time_scale`` times faster than wall-clock time; the operator's own
timeouts stay wall-clock, so a 60x cluster turns "10 minutes of node provisioning" into 10 seconds.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from gang_sim.testing.cluster_harness import SimulatedClusterHarness
from gang_sim.world.scenario import Scenario, load_scenario, parse_scenario


@dataclass
class SimulatedCluster:
    """A running emulator with its control plane, and the Airflow connection id pointing at it."""

    harness: SimulatedClusterHarness
    conn_id: str
    scenario: Scenario

    def objects(self, resource: str, namespace: str = "default", label_selector: str = "") -> list[dict[str, Any]]:
        """Objects of ``resource`` (a store key such as ``"v1/pods"``), read on the emulator's loop."""
        items, _ = self.harness.run(lambda: self.harness.store.list(resource, namespace, label_selector=label_selector))
        return list(items)

    def create(self, resource: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Create an object directly in the store (scenario set-up such as Kueue queues)."""
        created: dict[str, Any] = self.harness.run(lambda: self.harness.store.create(resource, body, namespace))
        return created


def _scenario(scenario: str | Scenario | dict[str, Any]) -> Scenario:
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, dict):
        return parse_scenario(scenario)
    return load_scenario(scenario)


@contextmanager
def simulated_cluster(
    scenario: str | Scenario | dict[str, Any] = "demo",
    *,
    time_scale: float | None = 60.0,
    conn_id: str = "kubernetes_default",
    **emulator_options: Any,
) -> Iterator[SimulatedCluster]:
    """Start the emulator and the scenario's controllers; stop both (and unset the connection) on exit.

    ``time_scale=None`` runs the controllers on a ``ManualClock`` (advance it with
    ``cluster.harness.advance(seconds)``); ``emulator_options`` go to the emulator (e.g.
    ``preload_crds=False`` for a cluster without the ProvisioningRequest and Kueue CRDs).
    """
    loaded = _scenario(scenario)
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    previous = os.environ.get(variable)
    with SimulatedClusterHarness(scenario=loaded, time_scale=time_scale, **emulator_options) as harness:
        os.environ[variable] = json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(harness.kubeconfig_path)}}
        )
        try:
            yield SimulatedCluster(harness=harness, conn_id=conn_id, scenario=loaded)
        finally:
            if previous is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = previous


# -- ``make demo`` ---------------------------------------------------------------------------------

DEMO_DAG_ID = "gang_nightly_training"
DEMO_TIME_SCALE = 15.0
"""Fast enough for a short demo, slow enough that zone A's 10-minute stock-out (40 s here) outlasts
try 1's 5-minute wait (20 s) even when Airflow's wall-clock start-up takes 20 s on a loaded machine."""
REPOSITORY = Path(__file__).resolve().parents[1]
TRAINER_IMAGE_FOR_DEMO = "ghcr.io/example/ddp-trainer:2026.11"
"""The example DAG's image; the demo cluster runs it as local processes (needs torch installed)."""


def _prepare_environment(home: Path) -> None:
    """Airflow reads its configuration at import: set it (and ``PATH``, for the local processes) first."""
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPOSITORY / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # The demo prints its own report; GANG_DEMO_LOG_LEVEL=INFO shows the task log as well.
            "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("GANG_DEMO_LOG_LEVEL", "CRITICAL"),
            # The members run as local processes of the emulator; "python" must be this interpreter.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )


def _scaled(task: Any, time_scale: float) -> None:
    """Shrink the task's wall-clock limits by the cluster's time scale, so "5 minutes" stays 5 simulated minutes."""
    for name in ("reservation_timeout", "startup_timeout", "run_timeout", "start_by"):
        value = getattr(task, name)
        if value is not None:
            setattr(task, name, value / time_scale)
    task.retry_delay = timedelta(0)


def report(state: str, summary: dict[str, Any] | None, elapsed: float) -> list[str]:
    """What ``make demo`` prints after the run: the outcome, one table row per try (its reason on the
    same row: a failed try is one line, not a traceback), rank 0's final training loss, GPU-hours."""
    lines = [f"Task state: {state} (in {elapsed:.0f} s of wall-clock time)"]
    if summary is None:
        return lines
    header = ("try", "step", "mode", "size", "outcome", "GPU-h reserved/used/idle", "why")
    rows = [
        header,
        *(
            (
                str(item["attempt"]),
                item["step"],
                item["mode"],
                str(item["size"]),
                item["outcome"],
                f"{item['gpu_hours_reserved']:.3f} / {item['gpu_hours_used']:.3f} / {item['gpu_hours_idle']:.3f}",
                item["message"],
            )
            for item in summary["tries"]
        ),
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header) - 1)]
    for row in rows:
        lines.append(
            "  " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + f" | {row[-1]}"
        )
    loss = training_loss(summary)
    lines += [
        f"Reserved: {summary['size_run']} of {summary['size_requested']} members in zone {summary['zone']} "
        f"({summary['provisioning_class']}); fallback step that ran: {summary['fallback_step']}",
        f"Exit codes by rank: {summary['exit_codes']}",
        f"Rank 0 training loss: {loss}" if loss is not None else "Rank 0 training loss: not in its log",
        "GPU-hours over all tries: reserved {gpu_hours_reserved:.3f}, used {gpu_hours_used:.3f}, "
        "idle {gpu_hours_idle:.3f}".format(**summary["all_tries"]),
        "(GPU-hours are measured in wall-clock time; the simulated cluster runs "
        f"{DEMO_TIME_SCALE:.0f}x faster, so a real cluster would take about {DEMO_TIME_SCALE:.0f}x as long)",
    ]
    return lines


def training_loss(summary: dict[str, Any]) -> float | None:
    """The ``mean_final_loss`` rank 0 of ``dags/trainer/ddp_train.py`` prints as its last JSON line."""
    for line in reversed(summary.get("rank_logs", {}).get("0", "").splitlines()):
        try:
            result = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(result, dict) and "mean_final_loss" in result:
            return float(result["mean_final_loss"])
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for rendezvous of members that are local processes)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def demo_scenario() -> Scenario:
    """The ``demo`` scenario, with the example's trainer image run as local processes too."""
    scenario = load_scenario("demo")
    return dataclasses.replace(scenario, local_process_images=(*scenario.local_process_images, TRAINER_IMAGE_FOR_DEMO))


def run_example_dag(
    time_scale: float = DEMO_TIME_SCALE, dag_id: str = DEMO_DAG_ID, task_id: str = "train"
) -> tuple[str, dict[str, Any] | None]:
    """Run an example DAG of ``dags/`` (its one gang task ``task_id``) once with ``dag.test()`` against
    the cluster ``kubernetes_default`` points at.

    The task's wall-clock limits are divided by ``time_scale`` so they keep their meaning on the
    faster simulated cluster. Returns the task state and its XCom summary (``None`` if it failed).
    """
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(str(REPOSITORY / "dags")).get_dag(dag_id)
    if dag is None:
        raise LookupError(f"DAG {dag_id} not found in {REPOSITORY / 'dags'}")
    task = dag.get_task(task_id)
    _scaled(task, time_scale)
    task.master_port = free_port()  # every member runs on this machine: do not assume 29500 is free
    # A nightly run starts at its data interval end (02:00); this one starts now. Count the scaled
    # start_by window from now, so "4 hours after 02:00" keeps its meaning for a run at any hour.
    import pendulum  # Airflow's timetables take pendulum times
    from airflow.serialization.encoders import coerce_to_core_timetable  # what dag.test() uses

    now = pendulum.now("UTC")
    if task.start_by is not None:
        interval_end = coerce_to_core_timetable(dag.timetable).infer_manual_data_interval(run_after=now).end
        task.start_by += now - interval_end
    return _outcome(dag.test(logical_date=now), task_id)


def main() -> int:
    """Run the example DAG once on the ``demo`` scenario and print what happened."""
    if importlib.util.find_spec("torch") is None:
        print("The example trainer needs PyTorch: run `make test` first (it installs the test extra, torch included).")
        return 2
    with tempfile.TemporaryDirectory(prefix="gang-demo-") as home:
        _prepare_environment(Path(home))
        _quiet_known_noise()
        from airflow.utils import db

        db.initdb()  # before the cluster starts: its scenario's clock runs from its start
        scenario = demo_scenario()
        print(f"Starting the Kubernetes emulator with the 'demo' scenario: {scenario.description}")
        with simulated_cluster(scenario, time_scale=DEMO_TIME_SCALE) as cluster:
            print(f"Emulator at {cluster.harness.url}; Airflow home {home}")
            print(f"Running {DEMO_DAG_ID} with dag.test() ...")
            started = time.monotonic()
            state, summary = run_example_dag()
            print("\n".join(report(state, summary, time.monotonic() - started)))
            print(f"Pods left in the cluster: {len(cluster.objects('v1/pods'))}")
            return 0 if state == "success" else 1


def _quiet_known_noise() -> None:
    """Keep the demo's output readable: library deprecation warnings are not news."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")


def _outcome(dag_run: Any, task_id: str) -> tuple[str, dict[str, Any] | None]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        ti = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id)
        ).one()
        row = session.scalars(
            XComModel.get_many(run_id=dag_run.run_id, key="return_value", task_ids=task_id, dag_ids=dag_run.dag_id)
        ).first()
        summary = XComModel.deserialize_value(row) if row is not None else None
        return str(ti.state), summary


if __name__ == "__main__":
    sys.exit(main())

"""A real multi-process JAX job (CPU, gloo collectives) with 3 processes, run by the simulated
cluster's local-process kubelet: ``jax.distributed.initialize`` reaches the coordinator on rank 0
through the gang's headless Service with the ``JAX_*`` variables the operator sets, and the
collectives' result reaches the task log through rank 0's log."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import jax  # noqa: F401  # the members import it: a test dependency, so a broken install fails here
import pytest

from demo.cluster import free_port
from gang_sim.world.scenario import load_scenario
from tests.e2e.gang_dags import gang_dag, task_instance

TRAINER = Path(__file__).resolve().parents[2] / "dags" / "trainer" / "jax_train.py"
IMAGE = "local/jax-trainer:test"
PROCESSES = 3


def rank0_reports(task_log: str) -> list[dict[str, Any]]:
    """The JSON lines rank 0 printed, as the operator copied them into the task log."""
    return [
        json.loads(line.split("[rank 0] ", 1)[1].split("}", 1)[0] + "}")
        for line in task_log.splitlines()
        if "[rank 0] {" in line
    ]


@pytest.mark.timeout(300)
def test_three_process_jax_job_runs_collectives(
    cluster_factory: Any, run_dag: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    scenario = dataclasses.replace(load_scenario("small"), local_process_images=(IMAGE,))
    cluster = cluster_factory(scenario, time_scale=60)
    dag = gang_dag(
        "jax_three_processes",
        image=IMAGE,
        command=["python", "-u", str(TRAINER)],
        size=PROCESSES,
        cpu="1",
        distributed="jax",
        master_port=free_port(),
        reservation="provisioning_request",
        deferrable=True,
        log_ranks=[0],
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=60),
        run_timeout=timedelta(seconds=180),
    )
    dag_run = run_dag(dag)
    task_log = capfd.readouterr().out
    assert task_instance(dag_run).state == "success", task_log[-3000:]
    reports = rank0_reports(task_log)
    assert len(reports) == 1, task_log[-3000:]
    report = reports[0]
    assert report["num_processes"] == PROCESSES
    assert report["process_ids"] == list(range(PROCESSES))
    assert report["sum_of_squares_allgather"] == report["sum_of_squares_psum"] == report["expected"] == 332833500
    assert cluster.objects("v1/pods") == []

"""A real PyTorch DDP job (gloo on CPU) with 4 ranks, run by the simulated cluster's local-process
kubelet: the ranks find each other through the gang's headless Service and rank 0 reports."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch  # noqa: F401  # the members import it: a test dependency, so a broken install fails here

from demo.cluster import free_port
from gang_sim.world.scenario import load_scenario
from tests.e2e.gang_dags import gang_dag, task_instance

TRAINER = Path(__file__).resolve().parents[2] / "dags" / "trainer" / "ddp_train.py"
IMAGE = "local/ddp-trainer:test"


@pytest.mark.timeout(300)
def test_four_rank_ddp_job_trains_and_reports(
    cluster_factory: Any, run_dag: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    scenario = dataclasses.replace(load_scenario("small"), local_process_images=(IMAGE,))
    cluster = cluster_factory(scenario, time_scale=60)
    dag = gang_dag(
        "ddp_four_ranks",
        image=IMAGE,
        command=["python", "-u", str(TRAINER)],
        size=4,
        cpu="1",
        distributed="torch",
        master_port=free_port(),
        reservation="provisioning_request",
        deferrable=True,
        log_ranks=[0],
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=60),
        run_timeout=timedelta(seconds=180),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    task_log = capfd.readouterr().out
    reports = [
        json.loads(line.split("[rank 0] ", 1)[1].split("}", 1)[0] + "}")
        for line in task_log.splitlines()
        if "[rank 0] {" in line
    ]
    assert len(reports) == 1, task_log[-3000:]
    assert reports[0]["world_size"] == 4
    assert reports[0]["mean_final_loss"] < 0.05
    assert cluster.objects("v1/pods") == []

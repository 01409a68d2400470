"""A real PyTorch DDP job under Kueue partial admission: 4 members requested, a queue with quota for
2, ``min_size=2``. Kueue admits 2; the 2 ranks are told ``WORLD_SIZE=2`` through the gang's world
ConfigMap (written once the Workload is admitted), rendezvous through the headless Service as local
processes, and train with 2 accumulation steps (``GANG_ORIGINAL_SIZE=4``) instead of hanging for
peers that never come."""

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
from tests.e2e.gang_dags import gang_dag, summary_of, task_instance
from tests.e2e.test_modes import kueue_queues

TRAINER = Path(__file__).resolve().parents[2] / "dags" / "trainer" / "ddp_train.py"
IMAGE = "local/ddp-trainer:test"


def rank0_reports(task_log: str) -> list[dict[str, Any]]:
    """The JSON lines rank 0 printed, as the operator copied them into the task log."""
    return [
        json.loads(line.split("[rank 0] ", 1)[1].split("}", 1)[0] + "}")
        for line in task_log.splitlines()
        if "[rank 0] {" in line
    ]


@pytest.mark.timeout(300)
def test_partially_admitted_ddp_job_trains_with_the_admitted_world_size(
    cluster_factory: Any, run_dag: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    scenario = dataclasses.replace(load_scenario("small"), local_process_images=(IMAGE,))
    cluster = cluster_factory(scenario, time_scale=60)
    kueue_queues(cluster, {"team-two": 2})
    dag = gang_dag(
        "ddp_partial_admission",
        image=IMAGE,
        command=["python", "-u", str(TRAINER)],
        size=4,
        min_size=2,
        gpus=1,
        cpu="1",
        distributed="torch",
        master_port=free_port(),
        reservation="kueue",
        kueue_queue="team-two",
        deferrable=True,
        log_ranks=[0],
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=60),
        run_timeout=timedelta(seconds=180),
    )
    dag_run = run_dag(dag)
    task_log = capfd.readouterr().out
    assert task_instance(dag_run).state == "success", task_log[-3000:]
    summary = summary_of(dag_run)
    assert (summary["size_requested"], summary["size_run"]) == (4, 2)
    assert summary["exit_codes"] == {"0": 0, "1": 0}
    reports = rank0_reports(task_log)
    assert len(reports) == 1, task_log[-3000:]
    assert (reports[0]["world_size"], reports[0]["original_size"]) == (2, 4)
    assert reports[0]["mean_final_loss"] < 0.05
    assert "tells the members 2 of 4 (created)" in task_log
    assert cluster.objects("v1/pods") == [] and cluster.objects("v1/configmaps") == []

"""The exit-code policy end to end: a member's code in ``fail_on_exit_codes`` fails the task without
another try; one in ``retry_on_exit_codes`` makes Airflow run try 2, whose summary names the rank,
the code and the rule that decided try 1."""

from __future__ import annotations

import dataclasses
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gang_sim.world.scenario import load_scenario
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "blocking"])
def test_a_fail_on_exit_code_fails_the_task_for_good(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str], deferrable: bool
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    dag = gang_dag(
        f"exit_code_fails_{deferrable}",
        retries=2,
        size=2,
        gpus=1,
        pod_template=simulated_pod(5, 3),
        fail_on_exit_codes=[2, 3],
        retry_on_exit_codes=[137],
        deferrable=deferrable,
        run_timeout=timedelta(seconds=120),
    )
    dag_run = run_dag(dag)
    ti = task_instance(dag_run)
    assert ti.state == "failed"
    assert ti.try_number == 1  # AirflowFailException: two retries left, none used
    log = capfd.readouterr().out
    assert "member_exit_fails_for_good" in log
    assert "rank 0 exited with 3, listed in fail_on_exit_codes" in log
    assert cluster.objects("v1/pods") == []


@pytest.mark.parametrize("reservation", ["provisioning_request", "workload"])
def test_a_retry_on_exit_code_runs_try_2(
    cluster_factory: Any, run_dag: Any, monkeypatch: pytest.MonkeyPatch, reservation: str
) -> None:
    """Rank 1 of try 1 exits 143 (its name carries ``-t1-``); try 2 runs and every rank succeeds."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    scenario = dataclasses.replace(load_scenario("small"), local_process_images=("local/shell",))
    cluster_factory(scenario, time_scale=60)
    script = 'case "$GANG_NAME" in *-t1-*) if [ "$GANG_RANK" = 1 ]; then exit 143; fi; sleep 600;; esac; exit 0'
    dag = gang_dag(
        f"exit_code_retries_{reservation}",
        reservation=reservation,
        retries=1,
        size=2,
        cpu="1",
        image="local/shell",
        command=["sh", "-c", script],
        fail_on_exit_codes=[2],
        retry_on_exit_codes=[143],
        deferrable=True,
        run_timeout=timedelta(seconds=120),
    )
    dag_run = run_dag(dag)
    ti = task_instance(dag_run)
    assert (ti.state, ti.try_number) == ("success", 2)
    first, second = summary_of(dag_run)["tries"]
    assert (first["outcome"], first["retryable"]) == ("member_exit_retryable", True)
    assert first["exit_code_decision"] == {
        "rank": 1,
        "exit_code": 143,
        "rule": "retry_on_exit_codes",
        "reason": "member_exit_retryable",
    }
    assert first["exit_codes"]["1"] == 143
    assert (second["step"], second["outcome"], second["exit_code_decision"]) == ("retry as-is", "all_succeeded", None)

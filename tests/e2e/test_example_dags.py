"""Every example DAG parses, and the nightly one runs on the ``demo`` scenario the way ``make demo`` runs it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.demo import REPOSITORY, demo_scenario, run_example_dag
from airflow_provider_gang.plugin import read_gang_xcoms

DEMO_TEST_TIME_SCALE = 15
"""The task's wall-clock limits are divided by the cluster's time scale, but Airflow's own overhead per
try (task start, deferral, trigger start) is wall-clock: at 60x a 5-minute reservation window was 5 s,
of which zone B's 100 simulated seconds of scale-up took 1.7 s, and a loaded 2-core machine ate the
rest. At 15x the window is 20 s wall, of which the scale-up takes 7 s: a try now fails on overhead
only past ~13 s, which means something is really wrong."""


def test_example_dags_parse_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(REPOSITORY / "dags"))
    assert bag.import_errors == {}
    assert "gang_nightly_training" in bag.dag_ids


@pytest.mark.timeout(300)
def test_nightly_training_runs_on_the_demo_cluster(cluster_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cluster = cluster_factory(demo_scenario(), time_scale=DEMO_TEST_TIME_SCALE)
    state, summary = run_example_dag(time_scale=DEMO_TEST_TIME_SCALE)
    assert state == "success"
    assert summary is not None
    assert summary["size_run"] in (4, 8) and summary["reservation_mode"] == "provisioning_request"
    assert set(summary["exit_codes"].values()) == {0}
    assert summary["all_tries"]["gpu_hours_used"] > 0
    assert cluster.objects("v1/pods") == []
    # The UI plugin's page reads the same XComs the operator pushed.
    from airflow.models.dagrun import DagRun

    (dag_run,) = DagRun.find(dag_id="gang_nightly_training")
    shown = read_gang_xcoms("gang_nightly_training", dag_run.run_id, "train")
    assert shown["summary"]["gang"] == summary["gang"]
    assert shown["reservation"]["gang"] == summary["gang"]

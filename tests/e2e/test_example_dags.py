"""Every example DAG parses, and the nightly one runs on the ``demo`` scenario the way ``make demo`` runs it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.demo import (
    DEMO_TIME_SCALE,
    REPOSITORY,
    demo_scenario,
    report,
    run_example_dag,
    training_loss,
)
from airflow_provider_gang.plugin import read_gang_xcoms


def test_example_dags_parse_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(REPOSITORY / "dags"))
    assert bag.import_errors == {}
    assert "gang_nightly_training" in bag.dag_ids


@pytest.mark.timeout(300)
def test_nightly_training_runs_on_the_demo_cluster(cluster_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cluster = cluster_factory(demo_scenario(), time_scale=DEMO_TIME_SCALE)
    state, summary = run_example_dag(time_scale=DEMO_TIME_SCALE)
    assert state == "success"
    assert summary is not None
    assert summary["size_run"] in (4, 8) and summary["reservation_mode"] == "provisioning_request"
    assert set(summary["exit_codes"].values()) == {0}
    assert summary["all_tries"]["gpu_hours_used"] > 0
    assert cluster.objects("v1/pods") == []
    loss = training_loss(summary)  # rank 0's last line, from the summary's log tail
    assert loss is not None and 0 <= loss < 1, summary["rank_logs"]
    printed = report(state, summary, 60.0)
    assert printed[1].split(" | ")[0].strip() == "try" and len(printed) == 2 + len(summary["tries"]) + 5
    assert all("Traceback" not in line for line in printed)
    # The UI plugin's page reads the same XComs the operator pushed.
    from airflow.models.dagrun import DagRun

    (dag_run,) = DagRun.find(dag_id="gang_nightly_training")
    shown = read_gang_xcoms("gang_nightly_training", dag_run.run_id, "train")
    assert shown["summary"]["gang"] == summary["gang"]
    assert shown["reservation"]["gang"] == summary["gang"]

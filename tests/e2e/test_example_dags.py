"""Every example DAG parses, and the nightly one runs on the ``demo`` scenario the way ``make demo`` runs it."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.plugin import read_gang_xcoms
from demo.report import report, training_loss
from demo.runner import DEMO_TIME_SCALE, demo_scenario, run_example_dag
from gang_sim.world.scenario import load_scenario

DAGS = Path(__file__).resolve().parents[2] / "dags"


def test_example_dags_parse_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(DAGS))
    assert bag.import_errors == {}
    assert "gang_nightly_training" in bag.dag_ids


@pytest.mark.timeout(300)
def test_nightly_training_runs_on_the_demo_cluster(cluster_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cluster = cluster_factory(demo_scenario(), time_scale=DEMO_TIME_SCALE)
    state, summary = run_example_dag(DAGS, time_scale=DEMO_TIME_SCALE)
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


#: Every other example DAG: (DAG id, task id, the scenario it runs on, images the test adds as local
#: processes, what it needs installed). ``python:*`` images run as local processes in every scenario.
EXAMPLES = [
    ("gang_kueue_team_training", "train", "kueue", "ghcr.io/example/ddp-trainer:*", "torch"),
    ("gang_dws_flex_start", "fine_tune", "dws", "ghcr.io/example/ddp-trainer:*", "torch"),
    ("gang_gates_smoke_test", "smoke_test", "small", None, None),
    ("gang_jax_job", "collectives", "small", "ghcr.io/example/jax-trainer:*", "jax"),
]
EXAMPLE_TIME_SCALE = 60.0


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("dag_id", "task_id", "scenario", "image", "needs"), EXAMPLES, ids=[example[0] for example in EXAMPLES]
)
def test_every_example_dag_completes_on_its_scenario(
    cluster_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    dag_id: str,
    task_id: str,
    scenario: str,
    image: str | None,
    needs: str | None,
) -> None:
    if needs is not None:
        pytest.importorskip(needs)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    loaded = load_scenario(scenario)
    if image is not None:
        loaded = dataclasses.replace(loaded, local_process_images=(*loaded.local_process_images, image))
    cluster = cluster_factory(loaded, time_scale=EXAMPLE_TIME_SCALE)
    state, summary = run_example_dag(DAGS, time_scale=EXAMPLE_TIME_SCALE, dag_id=dag_id, task_id=task_id)
    assert state == "success", summary
    assert summary is not None and set(summary["exit_codes"].values()) == {0}
    assert summary["tries"][-1]["outcome"] == "all_succeeded"
    assert summary["rank_logs"]["0"].strip(), summary["rank_logs"]  # rank 0's output reached the summary
    assert cluster.objects("v1/pods") == []

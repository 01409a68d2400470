"""Every example DAG parses, and the nightly one runs on the ``demo`` scenario as ``make demo`` runs it,
with one difference: the operator reads the cluster's clock, which starts with the task's first
request (``tests.cluster_time.running_from``), so its timeouts are decided in the simulated time the
scenario's stock-out and quota change happen in (``make demo`` divides the limits by the time scale
instead, and Airflow's start-up counts), and the run has one outcome."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

# The example trainers import jax and torch: test dependencies, so a broken install fails here.
import jax  # noqa: F401
import pytest
import torch  # noqa: F401

from airflow_provider_gang.plugin.stored_records import read_gang_xcoms
from airflow_provider_gang.reservation.naming import GANG_LABEL
from demo.report import report, training_loss
from demo.runner import DEMO_TIME_SCALE, demo_scenario, run_example_dag
from gang_sim.world.scenario import load_scenario
from tests.cluster_time import running_from

DAGS = Path(__file__).resolve().parents[2] / "dags"
PROVISIONING_REQUESTS = "autoscaling.x-k8s.io/v1/provisioningrequests"
RESERVATION_LABEL = "cloud.google.com/reservation-name"

OWN_LIMITS = 1.0
"""``run_example_dag`` keeps the DAGs' limits as written: the operator reads the cluster's clock
(``cluster_factory(cluster_time=True)``), so "5 minutes" already means 5 simulated minutes."""


def test_example_dags_parse_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(DAGS))
    assert bag.import_errors == {}
    assert "gang_nightly_training" in bag.dag_ids


@pytest.mark.timeout(300)
def test_nightly_training_runs_on_the_demo_cluster(cluster_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cluster = cluster_factory(demo_scenario(), time_scale=None, cluster_time=True)

    def requested() -> bool:
        return bool(cluster.objects(PROVISIONING_REQUESTS))

    with running_from(cluster, requested, time_scale=DEMO_TIME_SCALE):
        state, summary = run_example_dag(DAGS, time_scale=OWN_LIMITS)
    assert state == "success"
    assert summary is not None
    # Simulated time starts with try 1's request: its 5 minutes end before zone a's 10-minute
    # stock-out does; try 2 asks zone b, whose quota holds all 8 members from the start.
    assert [(item["step"], item["outcome"]) for item in summary["tries"]] == [
        ("as configured", "deadline"),
        ("other zone us-central1-b", "all_succeeded"),
    ]
    assert summary["size_run"] == 8 and summary["reservation_mode"] == "provisioning_request"
    assert set(summary["exit_codes"].values()) == {0}
    # Reserved GPU-hours are clock time; used ones come from the pods' wall-clock timestamps, which
    # the faster cluster time does not share (tests/e2e/test_accounting.py checks those).
    assert summary["all_tries"]["gpu_hours_reserved"] > 0
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
#: processes). ``python:*`` images run as local processes in every scenario.
EXAMPLES = [
    ("gang_kueue_team_training", "train", "kueue", "ghcr.io/example/ddp-trainer:*"),
    ("gang_dws_flex_start", "fine_tune", "dws", "ghcr.io/example/ddp-trainer:*"),
    ("gang_gates_smoke_test", "smoke_test", "small", None),
    ("gang_workload_api_smoke_test", "smoke_test", "small", None),
    ("gang_jax_job", "collectives", "small", "ghcr.io/example/jax-trainer:*"),
    ("gang_reserved_capacity", "train", "reserved", None),
    ("gang_spot_checkpoint", "train", "reserved", "ghcr.io/example/ddp-trainer:*"),
    ("gang_task_decorator", "train", "small", None),
    ("gang_topology_rack", "train", "topology", None),
]
EXAMPLE_TIME_SCALE = 60.0


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("dag_id", "task_id", "scenario", "image"), EXAMPLES, ids=[example[0] for example in EXAMPLES])
def test_every_example_dag_completes_on_its_scenario(
    cluster_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    dag_id: str,
    task_id: str,
    scenario: str,
    image: str | None,
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    loaded = load_scenario(scenario)
    if image is not None:
        loaded = dataclasses.replace(loaded, local_process_images=(*loaded.local_process_images, image))
    cluster = cluster_factory(loaded, time_scale=EXAMPLE_TIME_SCALE, cluster_time=True, record_changes=True)
    state, summary = run_example_dag(DAGS, time_scale=OWN_LIMITS, dag_id=dag_id, task_id=task_id)
    assert state == "success", summary
    assert summary is not None and set(summary["exit_codes"].values()) == {0}
    assert summary["tries"][-1]["outcome"] == "all_succeeded"
    assert summary["rank_logs"]["0"].strip(), summary["rank_logs"]  # rank 0's output reached the summary
    assert cluster.objects("v1/pods", label_selector=GANG_LABEL) == []  # the topology scenario has other pods
    if dag_id == "gang_reserved_capacity":  # the reservation held the gang: try 1, on its nodes
        assert [item["step"] for item in summary["tries"]] == ["as configured"], summary["tries"]
        reserved = {
            node["metadata"]["name"]
            for _, node in cluster.changes("v1/nodes")
            if (node["metadata"].get("labels") or {}).get(RESERVATION_LABEL) == "l4-reservation"
        }
        bound = {pod["spec"].get("nodeName") for _, pod in cluster.changes("v1/pods")} - {None}
        assert bound and bound <= reserved, (bound, reserved)
    if dag_id == "gang_spot_checkpoint":  # on spot nodes, and rank 0 reported its checkpoints
        spot = {
            node["metadata"]["name"]
            for _, node in cluster.changes("v1/nodes")
            if (node["metadata"].get("labels") or {}).get("cloud.google.com/gke-spot") == "true"
        }
        bound = {pod["spec"].get("nodeName") for _, pod in cluster.changes("v1/pods")} - {None}
        assert bound and bound <= spot, (bound, spot)
        assert summary["tries"][-1]["checkpoint_step"] == 20, summary["tries"]
    if dag_id == "gang_topology_rack":  # every rank in the one rack that holds four, on the first try
        assert [item["step"] for item in summary["tries"]] == ["as configured"], summary["tries"]
        assert summary["rank_domains"] == dict.fromkeys(["0", "1", "2", "3"], "rack-b1")
    if dag_id == "gang_task_decorator":  # rank 0's dict reached the next task
        assert summary["size_run"] == 3
        assert task_return_value(dag_id, "train") == {"rank": 0, "world_size": 3, "loss": 0.125}
        assert task_return_value(dag_id, "report") == "3 ranks trained; rank 0's loss is 0.125"


def task_return_value(dag_id: str, task_id: str) -> Any:
    """The XCom ``return_value`` of ``task_id`` in the DAG's newest run."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    (dag_run, *_) = sorted(DagRun.find(dag_id=dag_id), key=lambda run: run.id, reverse=True)
    with create_session() as session:
        query = XComModel.get_many(run_id=dag_run.run_id, key="return_value", task_ids=task_id, dag_ids=dag_id)
        row = session.scalars(query).first()
        return None if row is None else XComModel.deserialize_value(row)

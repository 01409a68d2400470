"""A gang succeeds in each reservation mode, on the simulated cluster, through ``dag.test()``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferrable", "blocking"])
def test_provisioning_request_gang_succeeds(cluster_factory: Any, run_dag: Any, deferrable: bool) -> None:
    cluster = cluster_factory("small", time_scale=60)
    dag = gang_dag(f"pr_success_{deferrable}", size=4, gpus=1, pod_template=simulated_pod(60),
                   reservation="provisioning_request", deferrable=deferrable,
                   reservation_timeout=timedelta(seconds=60), startup_timeout=timedelta(seconds=30))
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert summary["size_run"] == 4
    assert summary["reservation_mode"] == "provisioning_request"
    assert summary["exit_codes"] == {"0": 0, "1": 0, "2": 0, "3": 0}
    assert summary["gpu_hours_reserved"] >= summary["gpu_hours_used"] > 0
    assert cluster.objects("v1/pods") == []

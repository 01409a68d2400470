"""An API server that stops answering mid-run: every wait logs each reconnect attempt with its
backoff and, after ``unreachable_timeout`` without an answer, ends the try (retryable) with
``cluster_unreachable`` - instead of waiting forever, silently."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangTryFailed
from airflow_provider_gang.operators.try_history import TryHistory
from demo.cluster import CONN_ID
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_kill_and_adopt import gang_objects, running_pods

QUICK = {"retry_attempts": 2, "retry_base_delay": 0.1, "retry_max_delay": 0.5, "request_timeout": 2.0}


@pytest.mark.parametrize("fault", ["*:1.0:drop", "*:1.0:503"], ids=["connections-dropped", "answers-503"])
def test_an_api_server_lost_mid_run_ends_the_try_as_unreachable(
    cluster_factory: Any, capfd: pytest.CaptureFixture[str], fault: str
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    template = simulated_pod(3600)
    del template["metadata"]["annotations"]["sim.gang.dev/run-seconds"]  # runs until deleted
    op = GangTrainingOperator(
        task_id="train",
        size=2,
        gpus=1,
        pod_template=template,
        deferrable=True,
        retries=1,
        unreachable_timeout=3,
        client_options=QUICK,
        kubernetes_conn_id=CONN_ID,
    )
    context = context_for(FakeTaskInstance(f"unreachable_{fault[-4:]}", "run-1"))
    run = deferred(op.execute_reserved, context, first_event(deferred(op.execute, context)))
    eventually(lambda: running_pods(cluster, run.gang_name) == 2, timeout=30.0, what="both members running")
    # The API server goes away while the members run; the run trigger's LISTs and WATCHes (a killed
    # server closes the open watch, so the trigger reconnects at once) get no answer.
    cluster.emulator.faults = Faults.parse(fault)
    try:
        event = first_event(run, timeout=60)
    finally:
        cluster.emulator.faults = Faults()  # back for the worker's clean-up
    assert (event["status"], event["reason"]) == ("failure", "cluster_unreachable")
    assert "no answer from the API server for" in event["message"]
    logged = capfd.readouterr().out
    assert logged.count("API server did not answer") >= 2 and "retrying in" in logged
    with pytest.raises(GangTryFailed, match="cluster_unreachable"):
        op.execute_finished(context, event)
    assert [(record.outcome, record.retryable) for record in TryHistory(context).finished()] == [
        ("cluster_unreachable", True)
    ]
    eventually(lambda: gang_objects(cluster, run.gang_name) == {}, timeout=30.0, what="the gang's objects deleted")

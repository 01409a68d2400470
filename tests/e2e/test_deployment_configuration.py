"""The ``[gang]`` options of Airflow's configuration reach the triggers a task defers to, and a task's
own ``client_options`` win over them (``operators.configuration``)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from demo.cluster import CONN_ID
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, delete_like_on_kill
from tests.e2e.gang_dags import simulated_pod


def test_the_deferred_trigger_carries_the_configured_options_under_the_task_own(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster_factory("small", time_scale=None)  # manual clock: the reservation stays pending
    monkeypatch.setenv("AIRFLOW__GANG__HEARTBEAT_INTERVAL", "42")
    monkeypatch.setenv("AIRFLOW__GANG__WATCH_TIMEOUT", "77")
    monkeypatch.setenv("AIRFLOW__GANG__CLIENT_RETRY_ATTEMPTS", "4")
    monkeypatch.setenv("AIRFLOW__GANG__CLIENT_REQUEST_TIMEOUT", "9")
    op = GangTrainingOperator(
        task_id="train",
        size=2,
        pod_template=simulated_pod(30),
        deferrable=True,
        kubernetes_conn_id=CONN_ID,
        client_options={"request_timeout": 12},
    )
    trigger = deferred(op.execute, context_for(FakeTaskInstance("configured_options", "run-1")))
    arguments = trigger.arguments
    assert (arguments.heartbeat_seconds, arguments.watch_timeout_seconds) == (42.0, 77)
    assert arguments.client_options["retry_attempts"] == 4  # the deployment's option
    assert arguments.client_options["request_timeout"] == 12  # the task's own argument wins
    assert delete_like_on_kill(trigger) > 0

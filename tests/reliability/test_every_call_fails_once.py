"""Every API call a try makes, failing past the client's retries, once each.

A clean run of each mode is recorded from the emulator's request log; then, for every distinct
call in it (``verb/resource[/subresource]``), a fresh cluster runs the same task with that call's
first occurrence failing 503 as many times as the client tries (``count:<attempts>``). Whatever the
call, the task must end with no duplicate object, no orphan, every try recorded with a typed reason
and the ladder step that reason calls for. Calls the triggers make through a reflector (LIST,
WATCH) are retried there for as long as the wait lasts, so those runs succeed at the first try.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import RetryAsIs
from demo.cluster import CONN_ID
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_modes import kueue_queues
from tests.reliability.conftest import FaultCluster, report
from tests.reliability.emulator_side import call_target
from tests.reliability.harness import QUICK_CLIENT, SIM_SPEED, check, run_task

MODES = ("provisioning_request", "gates", "kueue")


def prepared(factory: Any, mode: str) -> FaultCluster:
    cluster = factory("small", time_scale=SIM_SPEED)
    if mode == "kueue":
        kueue_queues(cluster.cluster, {"team": 8})
    return cluster


def operator(cluster: FaultCluster, mode: str) -> GangTrainingOperator:
    extra: dict[str, Any] = {"kueue_queue": "team"} if mode == "kueue" else {}
    return GangTrainingOperator(
        task_id="train",
        size=2,
        gpus=1,
        pod_template=simulated_pod(10),
        reservation=mode,
        distributed="torch",
        deferrable=True,
        retries=1,
        fallbacks=[RetryAsIs()],
        client_options=QUICK_CLIENT,
        kubernetes_conn_id=CONN_ID,
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=60),
        **extra,
    )


def calls_of_a_clean_run(factory: Any, mode: str) -> list[str]:
    cluster = prepared(factory, mode)
    cluster.control.requests(clear=True)
    run = run_task(operator(cluster, mode), f"clean_{mode}")
    assert run.outcome == "success", run.error
    report(f"clean run ({mode})", check(run, cluster.ledger), faults=0)
    return sorted(
        {
            call_target(entry)
            for entry in cluster.control.requests()
            if entry["resource"] != "selfsubjectaccessreviews" or entry["verb"] == "create"
        }
    )


CALLS: dict[str, list[str]] = {}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", MODES)
def test_every_call_of_a_try_failing_past_its_retries_breaks_no_invariant(
    fault_cluster_factory: Any, mode: str
) -> None:
    calls = calls_of_a_clean_run(fault_cluster_factory, mode)
    assert any(call.startswith("create/pods") or call.startswith("create/batch/jobs") for call in calls), calls
    for number, call in enumerate(calls):
        cluster = prepared(fault_cluster_factory, mode)
        attempts = int(QUICK_CLIENT["retry_attempts"])
        cluster.control.set_faults(f"{call}:1.0:503:count:{attempts}")
        run = run_task(operator(cluster, mode), f"fails_{mode}_{number}")
        cluster.control.clear_faults()
        injected = sum(1 for entry in cluster.control.requests() if entry["injected"])
        verdict = check(run, cluster.ledger)
        assert run.outcome == "success", (call, run.error, [record.to_dict() for record in run.records])
        report(f"every call fails once ({mode})", verdict, faults=injected)

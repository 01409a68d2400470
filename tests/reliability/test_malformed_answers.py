"""Malformed cluster answers during a whole task: the try fails naming the object and the field when
the answer cannot be read (retryable: the next try makes new objects), and goes on untroubled when
the answer is merely unusual (an unknown condition type, no status yet, a cut watch line). The
trigger never raises: it reports, so the triggerer survives.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import RetryAsIs
from demo.cluster import CONN_ID
from tests.e2e.gang_dags import simulated_pod
from tests.reliability.conftest import report
from tests.reliability.harness import QUICK_CLIENT, SIM_SPEED, check, run_task

CASES = [
    # (fault, outcomes of the tries, what try 1's message names)
    ("malformed/provisioningrequests:wrong-type:count:2", ["malformed_answer", "all_succeeded"], "is a string, not"),
    ("malformed/pods:wrong-type:count:1", ["malformed_answer", "all_succeeded"], "is a string, not"),
    ("malformed/provisioningrequests:unknown-condition", ["all_succeeded"], None),
    ("malformed/pods:unknown-condition", ["all_succeeded"], None),
    ("malformed/provisioningrequests:no-status:count:1", ["all_succeeded"], None),
    ("malformed/pods:truncated-watch:count:3", ["all_succeeded"], None),
    ("malformed/provisioningrequests:truncated-watch:count:3", ["all_succeeded"], None),
]


@pytest.mark.timeout(300)
def test_malformed_answers_end_the_try_as_the_answer_warrants(fault_cluster_factory: Any) -> None:
    for number, (fault, outcomes, named) in enumerate(CASES):
        cluster = fault_cluster_factory("small", time_scale=SIM_SPEED)
        op = GangTrainingOperator(
            task_id="train",
            size=2,
            gpus=1,
            pod_template=simulated_pod(10),
            deferrable=True,
            retries=1,
            fallbacks=[RetryAsIs()],
            client_options=QUICK_CLIENT,
            kubernetes_conn_id=CONN_ID,
            reservation_timeout=timedelta(seconds=60),
            startup_timeout=timedelta(seconds=60),
        )
        cluster.control.set_faults(fault)
        run = run_task(op, f"malformed_{number}")
        injected = sum(1 for entry in cluster.control.requests() if entry["injected"])
        assert [record.outcome for record in run.records] == outcomes, (fault, [r.to_dict() for r in run.records])
        if named is not None:
            assert named in run.records[0].message and "default/" in run.records[0].message
            assert run.records[0].retryable
        assert injected >= 1, f"{fault} was never injected"
        report("malformed answers", check(run, cluster.ledger), faults=injected)

"""A transient failure that no ladder step answers repeats the step, through ``dag.test()``.

The measured bug (issue 20): ``fallbacks=[ShrinkTo(2)]``, ``retries=1``, pod creation answered 503
past the client's retries. Try 1 ends ``cluster_unreachable`` (nothing adopted, nothing left); try 2
used to end at once with ``ladder_exhausted`` although one Airflow retry was left. The fault comes
from outside the provider: the emulator's fault injection (``gang_sim.apiserver.http.faults``).
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.reservation.fallback import ShrinkTo
from gang_sim.apiserver.http.faults import Faults
from tests.e2e.gang_dags import gang_dag, simulated_pod, summary_of, task_instance

CLIENT = {"retry_attempts": 2, "retry_base_delay": 0.1, "retry_max_delay": 0.2, "max_parallel_requests": 1}
"""Two attempts per call, one create at a time: ``create/pods:...:count:2`` fails exactly the first
member's create past its retries."""


def shrink_dag(dag_id: str) -> Any:
    return gang_dag(
        dag_id,
        retries=1,
        size=4,
        min_size=2,
        gpus=1,
        pod_template=simulated_pod(20),
        fallbacks=[ShrinkTo(2)],
        client_options=CLIENT,
        deferrable=True,
    )


@pytest.mark.timeout(300)
def test_pod_creation_failing_past_its_retries_repeats_the_configured_gang(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster = cluster_factory("small", time_scale=60)  # four 1-GPU nodes: the gang as configured fits
    cluster.emulator.faults = Faults.parse("create/pods:1.0:503:count:2")
    dag_run = run_dag(shrink_dag("transient_repeat"))
    logged = capfd.readouterr()
    assert task_instance(dag_run).state == "success", logged.out[-3000:]
    summary = summary_of(dag_run)
    tries = [(item["attempt"], item["step"], item["outcome"], item["size"]) for item in summary["tries"]]
    assert tries == [
        (1, "as configured", "cluster_unreachable", 4),
        (2, "as configured (repeated after a transient failure)", "all_succeeded", 4),
    ]
    assert [item["repeated"] for item in summary["tries"]] == [False, True]
    assert "repeating step 'as configured' after a transient failure (cluster_unreachable)" in logged.out + logged.err
    assert summary["size_run"] == 4  # the ShrinkTo step was not used up by the API server's failure
    assert cluster.objects("v1/pods") == []
    assert cluster.objects("autoscaling.x-k8s.io/v1/provisioningrequests") == []


@pytest.mark.timeout(300)
def test_a_fault_that_outlasts_the_retries_fails_the_task_with_the_repeated_try_recorded(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    cluster.emulator.faults = Faults.parse("create/pods:1.0:503")
    try:
        dag_run = run_dag(shrink_dag("transient_outlasts"))
    finally:
        cluster.emulator.faults = Faults()
    logged = capfd.readouterr()
    ti = task_instance(dag_run)
    assert (ti.state, ti.try_number) == ("failed", 2), logged.out[-3000:]  # Airflow's retries bound the repeats
    text = logged.out + logged.err
    assert "repeating step 'as configured' after a transient failure (cluster_unreachable)" in text
    assert "ladder_exhausted" not in text
    assert (
        "try 2 | as configured (repeated after a transient failure) | provisioning_request | 4 | cluster_unreachable"
        in text
    )
    assert cluster.objects("v1/pods") == []
    assert cluster.objects("autoscaling.x-k8s.io/v1/provisioningrequests") == []

"""A gang of 64 launched on the emulator: members created (gates mode: released) at most
``max_parallel_requests`` at a time, each exactly once, and a create failing past its retries
mid-way ends the try, recorded, with nothing duplicated by the next try.

Concurrency is read on the emulator's side, not timed: at every pod change the store commits, the
creates (patches) of pods the emulator has received and not yet answered are counted in its request
log (``/_sim/requests``: a request's ``code`` is set when its answer goes out, after the commit).
A 30 ms ``latency`` fault keeps each request in the emulator long enough for the workers' requests
to overlap. The mid-way failure is injected from the same change callback: once the 20th member of
try 1 is stored, every further pod create is answered 503, until try 2 starts; only the creates
then in flight are tried again (one per worker), no new one is started.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import RetryAsIs
from airflow_provider_gang.reservation.phases import Reason
from demo.cluster import CONN_ID
from gang_sim.apiserver.http.faults import Faults
from tests.e2e.gang_dags import simulated_pod
from tests.reliability.conftest import FaultCluster, report
from tests.reliability.harness import QUICK_CLIENT, SIM_SPEED, check, run_task

SIZE = 64
PARALLEL = 8
FAILING_AFTER = 20
LATENCY = "latency:0.03"
SCENARIO = {
    "name": "eight-gpu-nodes",
    "nodePools": [
        {
            "name": "gpu",
            "zone": "us-central1-a",
            "gpuType": "nvidia-l4",
            "gpusPerNode": 8,
            "cpu": "64",
            "memory": "256Gi",
            "maxNodes": 8,
            "provisioningDelaySeconds": 60,
        }
    ],
}
"""Room for 64 one-GPU members: 8 nodes of 8 GPUs, provisioned in 60 simulated seconds."""


class LaunchObserver:
    """Follows the store (``Store.subscribe``): the most pod creates and patches the emulator held
    unanswered at once, and the trigger of the mid-way failure."""

    def __init__(self, cluster: FaultCluster, *, fail_after: int | None) -> None:
        self.harness = cluster.cluster
        self.most: Counter[str] = Counter()
        self.fail_after = fail_after
        self.members_stored: Counter[str] = Counter()
        self.stored_as: Counter[str] = Counter()
        """How many times each pod name was stored (ADDED)."""
        assert self.harness.emulator is not None
        self.context = self.harness.emulator.context
        self.unsubscribe = self.harness.run(lambda: self.harness.store.subscribe(self.changed))

    def changed(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource != "v1/pods":
            return
        unanswered = Counter(
            entry["verb"]
            for entry in self.context.requests.snapshot()
            if entry["resource"] == "pods" and entry["subresource"] is None and entry["code"] is None
        )
        for verb in ("create", "patch"):
            self.most[verb] = max(self.most[verb], unanswered[verb])
        gang = (obj["metadata"].get("labels") or {}).get(naming.GANG_LABEL)
        if event_type == "ADDED" and gang:
            self.stored_as[str(obj["metadata"]["name"])] += 1
            self.members_stored[gang] += 1
            if self.fail_after is not None and sum(self.members_stored.values()) == self.fail_after:
                self.context.faults = Faults.parse(f"create/pods:1.0:503,{LATENCY}")


def operator(cluster: FaultCluster, mode: str) -> GangTrainingOperator:
    return GangTrainingOperator(
        task_id="train",
        size=SIZE,
        gpus=1,
        pod_template=simulated_pod(5),
        reservation=mode,
        deferrable=True,
        retries=1,
        fallbacks=[RetryAsIs()],
        kubernetes_conn_id=CONN_ID,
        client_options={**QUICK_CLIENT, "max_parallel_requests": PARALLEL},
        reservation_timeout=timedelta(seconds=300),
        startup_timeout=timedelta(seconds=300),
    )


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["provisioning_request", "gates"])
def test_a_64_member_gang_is_created_a_bounded_number_at_a_time_and_a_failure_midway_duplicates_nothing(
    fault_cluster_factory: Any, mode: str
) -> None:
    cluster = fault_cluster_factory(SCENARIO, time_scale=SIM_SPEED)
    cluster.control.set_faults(LATENCY)
    cluster.control.requests(clear=True)
    observer = LaunchObserver(cluster, fail_after=FAILING_AFTER)
    try:
        run = run_task(
            operator(cluster, mode),
            f"large_gang_{mode}",
            before_try=lambda number: number == 2 and cluster.control.set_faults(LATENCY),
        )
    finally:
        cluster.cluster.run(observer.unsubscribe)
    entries = cluster.control.requests()
    cluster.control.clear_faults()
    assert run.outcome == "success", (run.error, [record.to_dict() for record in run.records])
    first, second = run.records
    assert first.outcome != Reason.ALL_SUCCEEDED.value and second.outcome == Reason.ALL_SUCCEEDED.value
    assert 0 < observer.members_stored[str(first.gang)] < SIZE, observer.members_stored
    assert [name for name, count in observer.stored_as.items() if count > 1] == []
    assert observer.members_stored[str(second.gang)] == SIZE
    assert 1 < observer.most["create"] <= PARALLEL, observer.most
    if mode == "gates":
        assert 1 < observer.most["patch"] <= PARALLEL, observer.most
    injected = sum(1 for entry in entries if entry["injected"] and entry["injected"] != "latency")
    # The first create failing past its retries stops the others: only the creates in flight then
    # (one per worker) are tried, each as often as the client tries, not the 40-odd members left.
    assert 0 < injected <= PARALLEL * int(QUICK_CLIENT["retry_attempts"]), injected
    report(f"64 members, a create failing mid-way ({mode})", check(run, cluster.ledger), faults=injected)

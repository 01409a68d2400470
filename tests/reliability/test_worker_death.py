"""A worker killed (SIGKILL) after k of the N objects of its try were created, for every k: the next
try adopts what exists and creates only what is missing - nothing duplicated, nothing left.

The worker is a real process (``tests/reliability/worker.py``) running try 1 in blocking mode; the
test kills it from inside the emulator the moment the store commits the k-th gang object (the
store's change callback runs before the create's answer is sent, so the worker never learns it
succeeded). Try 2 then runs here with the same task state file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.reservation import naming
from tests.child_processes import REPOSITORY, child_environment
from tests.reliability import worker
from tests.reliability.conftest import FaultCluster, report
from tests.reliability.harness import SIM_SPEED, check, run_task

OBJECTS_OF_A_TRY = {"provisioning_request": 6, "gates": 6}
"""Owner ConfigMap, Service, PodTemplate, ProvisioningRequest and 2 pods (launched, or gated)."""


def start_worker(state: Path, dag_id: str, mode: str, log: Path) -> subprocess.Popen[bytes]:
    # The repository for ``tests``, ahead of whatever the caller's path already held.
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.worker", str(state), dag_id, mode],
            cwd=REPOSITORY,
            env=child_environment(),
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def kill_after_creates(cluster: FaultCluster, process: subprocess.Popen[bytes], creates: int) -> Any:
    """SIGKILL ``process`` from the store's change callback once ``creates`` gang objects exist."""
    seen = {"count": 0}

    def changed(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        labels = obj.get("metadata", {}).get("labels") or {}
        if event_type == "ADDED" and naming.GANG_LABEL in labels:
            seen["count"] += 1
            if seen["count"] == creates:
                os.kill(process.pid, signal.SIGKILL)

    harness = cluster.cluster
    return harness.run(lambda: harness.store.subscribe(changed))


@pytest.mark.timeout(400)
@pytest.mark.parametrize("mode", sorted(OBJECTS_OF_A_TRY))
def test_a_worker_killed_after_any_number_of_creates_is_adopted_without_duplicates(
    fault_cluster_factory: Any, tmp_path: Path, mode: str
) -> None:
    for creates in range(1, OBJECTS_OF_A_TRY[mode] + 1):
        cluster = fault_cluster_factory("small", time_scale=SIM_SPEED)
        state, dag_id = tmp_path / f"state-{mode}-{creates}.json", f"worker_death_{mode}_{creates}"
        log = tmp_path / f"worker-{mode}-{creates}.log"
        process = start_worker(state, dag_id, mode, log)
        unsubscribe = kill_after_creates(cluster, process, creates)
        try:
            code = process.wait(timeout=120)
        finally:
            cluster.cluster.run(unsubscribe)
        assert code == -signal.SIGKILL, (
            f"worker ended with {code} before its {creates}th create: {log.read_text()[-2000:]}"
        )
        stored = len(cluster.ledger.objects_of(set(cluster.ledger.created_at)))
        assert stored >= creates
        run = run_task(
            worker.operator(mode, deferrable=True),
            dag_id,
            first_try=2,
            max_tries=2,
            context_changes={"task_state_store": worker.FileStateStore(state)},
        )
        assert run.outcome == "success", run.error
        assert [(record.attempt, record.outcome) for record in run.records] == [
            (1, "worker_lost"),
            (2, "all_succeeded"),
        ]
        assert run.records[1].adopted_from == 1 and run.records[1].gang == run.records[0].gang
        report(f"worker killed after k creates ({mode})", check(run, cluster.ledger), faults=1)

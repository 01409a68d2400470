"""A worker killed (SIGKILL) right after its k-th create took effect, on the real control plane: the
next try adopts what exists and creates only what is missing - nothing duplicated, nothing left.

The worker is a real process (:mod:`tests.real.worker`) running try 1 in blocking mode through the
fault proxy; the proxy kills it once the apiserver has stored the k-th object of the gang, before
relaying that answer, so the worker never learns the create succeeded. Try 2 then runs here with the
same task state file. One row per mode, k chosen where adoption has the most to do: the
ProvisioningRequest stored but its pods not created; one of two gated pods stored; Kueue's Job stored.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_processes import REPOSITORY, child_environment
from tests.real.backends import RealBackend
from tests.real.fault_proxy import Call, FaultProxy
from tests.real.proxied import ProxyLedger, gang_operator, is_created, proxy, proxy_session  # noqa: F401
from tests.reliability.harness import check, run_task
from tests.reliability.worker import FileStateStore

KILLED_AFTER = {"provisioning_request": 3, "gates": 4, "kueue": 2}
"""Creates before the kill: owner ConfigMap, PodTemplate, ProvisioningRequest, then the pods (no
Service: the task is not distributed); Kueue: owner ConfigMap, then the Job."""


def start_worker(state: Path, dag_id: str, mode: str, log: Path, run_seconds: float = 5) -> subprocess.Popen[bytes]:
    """Try 1 in a worker process (:mod:`tests.real.worker`), its output in ``log``."""
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.real.worker", str(state), dag_id, mode, str(run_seconds)],
            cwd=REPOSITORY,
            env=child_environment(),
            stdout=output,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", sorted(KILLED_AFTER))
def test_a_worker_killed_after_k_creates_is_adopted_without_duplicates(
    proxy: FaultProxy,  # noqa: F811
    cluster: RealBackend,
    tmp_path: Path,
    mode: str,
) -> None:
    state, dag_id, log = tmp_path / "state.json", f"real_worker_death_{mode}", tmp_path / "worker.log"
    process = start_worker(state, dag_id, mode, log)
    stored = {"count": 0}

    def kill_at_the_kth_create(call: Call) -> None:
        if is_created(call):
            stored["count"] += 1
            if stored["count"] == KILLED_AFTER[mode]:
                os.kill(process.pid, signal.SIGKILL)

    proxy.on_answer = kill_at_the_kth_create
    try:
        code = process.wait(timeout=180)
    finally:
        proxy.on_answer = None
    assert code == -signal.SIGKILL, f"the worker ended with {code} before its create: {log.read_text()[-3000:]}"
    ledger = ProxyLedger(proxy, cluster.cluster.kubeconfig_path)
    try:
        # Members are created concurrently (``max_parallel_requests``): creates already on their way
        # when the k-th was stored may be stored too, so try 1 leaves at least k objects, not exactly k.
        assert len(ledger.creates()) >= KILLED_AFTER[mode], ledger.creates()
        run = run_task(
            gang_operator(mode, retries=1),
            dag_id,
            first_try=2,
            max_tries=2,
            context_changes={"task_state_store": FileStateStore(state)},
        )
        verdict = check(run, ledger, grace=60)
    finally:
        ledger.close()
    assert run.outcome == "success", run.error
    assert [(record.attempt, record.outcome) for record in run.records] == [(1, "worker_lost"), (2, "all_succeeded")]
    assert run.records[1].adopted_from == 1 and run.records[1].gang == run.records[0].gang
    assert verdict.problems() == [], verdict.problems()

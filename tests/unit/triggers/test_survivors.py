"""The run trigger's drain of a gang's running members (``triggers.survivors``) on the emulator with
graceful pod deletion: a member that saves on SIGTERM has its report read before the try is
recorded; a member that does not stop within its grace period is given up on after grace + margin
(what was read is kept) and the kubelet's SIGKILL removes it afterwards - nothing is left behind.
The log ranks' tails are read before the members are stopped; when the ``log`` subresource fails
(the emulator's faults) the drain still stops them and reads their reports."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

import pytest
import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation.member_history import RunMemory
from airflow_provider_gang.reservation.naming import RANK_LABEL
from airflow_provider_gang.triggers.survivors import Drain
from gang_sim.testing.eventually import eventually
from gang_sim.testing.harness import ClusterHarness
from gang_sim.world.scenario import load_scenario

SELECTOR = "gang.test/name=drained"
SAVES_ON_SIGTERM = """
import json, os, signal, sys, time
path = os.environ["GANG_SIM_TERMINATION_MESSAGE_PATH"]
def stop(signum, frame):
    with open(path, "w") as file:
        file.write(json.dumps({"checkpoint_step": 12, "step": 12}))
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
with open(path, "w") as file:
    file.write(json.dumps({"checkpoint_step": 10, "step": 11}))
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""
IGNORES_SIGTERM = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def _member(rank: int, code: str, grace: int) -> dict[str, Any]:
    container = {
        "name": "trainer",
        "image": "python:3.11-slim",
        "command": ["python", "-c", code],
        "resources": {"requests": {"cpu": "100m"}},
    }
    return {
        "metadata": {"name": f"drained-{rank}", "labels": {"gang.test/name": "drained", RANK_LABEL: str(rank)}},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace, "containers": [container]},
    }


def test_survivors_report_on_sigterm_and_one_that_outlives_its_grace_period_is_given_up_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The emulator's clock is manual: its kubelet never reaches the grace period until advanced, so
    # rank 1 outlives the drain's wait (1 s + 0.5 s margin of real time) - a kubelet slower than promised.
    with ClusterHarness(load_scenario("small")) as cluster:
        store = cluster.store
        cluster.create("v1/pods", _member(0, SAVES_ON_SIGTERM, grace=1), namespace="default")
        cluster.create("v1/pods", _member(1, IGNORES_SIGTERM, grace=1), namespace="default")

        def running(rank: int) -> None:
            def ready() -> bool:
                return "ready" in cluster.run(lambda: store.logs.read("default", f"drained-{rank}", "trainer"))

            eventually(ready, timeout=30, what=f"rank {rank} running", interval=0.1)

        running(0)
        running(1)
        pods = cluster.objects("v1/pods")
        memory = RunMemory()
        log = logging.getLogger("test_survivors")
        kubeconfig = yaml.safe_load(cluster.kubeconfig_path.read_text())

        async def drain() -> None:
            async with await KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig)) as client:
                await Drain(client, "default", SELECTOR, memory, log, "drained", margin=0.5).run(pods)

        with caplog.at_level(logging.INFO, logger="test_survivors"):
            asyncio.run(asyncio.wait_for(drain(), timeout=30))
        assert memory.checkpoint is not None
        assert (memory.checkpoint.rank, memory.checkpoint.step, memory.checkpoint.progress) == (0, 12, 12)
        messages = [record.getMessage() for record in caplog.records]
        assert any("stopping ranks [0, 1]" in message for message in messages), messages
        assert any("ranks [1] did not stop within 2 s" in message for message in messages), messages

        def names() -> set[str]:
            return {item["metadata"]["name"] for item in cluster.objects("v1/pods")}

        assert names() == {"drained-1"}  # marked for deletion, its grace period not over on the cluster
        cluster.advance(2)
        eventually(lambda: not names(), timeout=30, what="rank 1 removed after SIGKILL")


def _two_saving_members(cluster: ClusterHarness) -> list[dict[str, Any]]:
    """Ranks 0 and 1, both saving on SIGTERM, once both have printed "ready"; their pods."""
    for rank in (0, 1):
        cluster.create("v1/pods", _member(rank, SAVES_ON_SIGTERM, grace=1), namespace="default")

    def ready(rank: int) -> bool:
        return "ready" in cluster.run(lambda: cluster.store.logs.read("default", f"drained-{rank}", "trainer"))

    for rank in (0, 1):
        eventually(functools.partial(ready, rank), timeout=30, what=f"rank {rank} running", interval=0.1)
    return cluster.objects("v1/pods")


def _drain(cluster: ClusterHarness, pods: list[dict[str, Any]], memory: RunMemory, log_ranks: list[int]) -> Drain:
    kubeconfig = yaml.safe_load(cluster.kubeconfig_path.read_text())
    drain: Drain | None = None

    async def run() -> None:
        nonlocal drain
        async with await KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig)) as client:
            drain = Drain(client, "default", SELECTOR, memory, logging.getLogger("x"), "drained", log_ranks=log_ranks)
            await drain.run(pods)

    asyncio.run(asyncio.wait_for(run(), timeout=30))
    assert drain is not None
    return drain


@pytest.mark.parametrize("log_fault", [None, "get/pods/log:1.0:500"], ids=["logs-readable", "log-reads-fail"])
def test_the_log_ranks_tails_are_saved_before_the_members_are_stopped(log_fault: str | None) -> None:
    with ClusterHarness(load_scenario("small"), faults=log_fault) as cluster:
        pods = _two_saving_members(cluster)
        memory = RunMemory()
        drain = _drain(cluster, pods, memory, log_ranks=[0])
        if log_fault is None:
            assert list(drain.saved_logs) == [0]  # rank 1 is not a log rank
            assert "ready" in drain.saved_logs[0]
        else:
            assert drain.saved_logs == {}
        assert memory.checkpoint is not None and memory.checkpoint.step == 12  # stopped and read all the same
        eventually(lambda: not cluster.objects("v1/pods"), timeout=30, what="both members removed")


def test_no_survivors_no_requests() -> None:
    memory = RunMemory()
    finished = [{"metadata": {"name": "m-0", "uid": "u"}, "status": {"phase": "Succeeded"}}]

    async def drain() -> None:
        await Drain(None, "default", SELECTOR, memory, logging.getLogger("x"), "g").run(finished)  # type: ignore[arg-type]

    asyncio.run(drain())
    assert memory.checkpoint is None

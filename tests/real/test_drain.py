"""The run trigger's drain of running members (``triggers.survivors``) on the real control plane.

kube-apiserver 1.37 only marks a deleted pod that is bound to a node (``deletionTimestamp``,
``deletionGracePeriodSeconds``) and leaves it to its kubelet (``CheckGracefulDelete`` in
``pkg/registry/core/pod/strategy.go``). kwok runs no containers, so the harness's kwok stages stand
in for what the kubelet does (:mod:`gang_sim.testing.real.stages`): ``gang-member-stop`` writes the
terminated status - exit code 143 and the termination message the member "wrote"
(``sim.gang.dev/termination-message``), ``sim.gang.dev/stop-seconds`` after the mark - and kwok's
``pod-delete`` removes the pod within its grace period. The drain deletes both members of a gang and
reads rank 0's checkpoint report from that status; the recorded versions show the order a kubelet
gives them: marked with the pod's grace period, terminated with the message, deleted.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.checkpoint import CheckpointReport
from airflow_provider_gang.reservation.member_history import RunMemory
from airflow_provider_gang.triggers.survivors import Drain
from tests.real.backends import RealBackend, wait_for
from tests.real.recording import recording

pytestmark = pytest.mark.timeout(300)
GANG = "real-drain-t1-00000000"
SELECTOR = f"{naming.GANG_LABEL}={GANG},{naming.ROLE_LABEL}=member"
GRACE_SECONDS = 5
REPORT = {"checkpoint_step": 7, "step": 9}


def member(rank: int, annotations: dict[str, str]) -> dict[str, Any]:
    """A member that runs until deleted (no ``sim.gang.dev/run-seconds``) on the CPU node."""
    labels = {naming.GANG_LABEL: GANG, naming.ROLE_LABEL: "member", naming.RANK_LABEL: str(rank)}
    container = {
        "name": "trainer",
        "image": "trainer:sim",
        "command": ["train"],
        "resources": {"requests": {"cpu": "100m"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{GANG}-{rank}", "labels": labels, "annotations": annotations},
        "spec": {"terminationGracePeriodSeconds": GRACE_SECONDS, "restartPolicy": "Never", "containers": [container]},
    }


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return dict((statuses[0].get("state") or {}).get("terminated") or {})


def test_a_stopped_members_termination_message_is_read_by_the_drain(
    cluster: RealBackend, caplog: pytest.LogCaptureFixture
) -> None:
    # rank 0 reports its checkpoint and takes 2 s to stop; rank 1 stops at once and reports nothing
    reports = {"sim.gang.dev/termination-message": json.dumps(REPORT), "sim.gang.dev/stop-seconds": "2"}
    cluster.create("v1/pods", member(0, reports))
    cluster.create("v1/pods", member(1, {}))

    def running() -> list[dict[str, Any]] | None:
        pods = cluster.objects("v1/pods", label_selector=SELECTOR)
        phases = [(pod.get("status") or {}).get("phase") for pod in pods]
        return pods if phases == ["Running", "Running"] else None

    pods = wait_for(running, timeout=120, what="both members running")
    kubeconfig = yaml.safe_load(cluster.cluster.kubeconfig_path.read_text())
    memory, log = RunMemory(), logging.getLogger("test_drain")

    async def run() -> Drain:
        async with await KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig)) as client:
            drain = Drain(client, "default", SELECTOR, memory, log, GANG)
            await drain.run(pods)
            return drain

    with (
        recording(str(cluster.cluster.kubeconfig_path), "v1/pods") as seen,
        caplog.at_level(logging.INFO, "test_drain"),
    ):
        drain = asyncio.run(asyncio.wait_for(run(), timeout=120))
        wait_for(lambda: not cluster.objects("v1/pods", label_selector=SELECTOR), timeout=60, what="both removed")
    lines = [record.getMessage() for record in caplog.records if record.name == "test_drain"]
    assert memory.checkpoint == CheckpointReport(step=7, progress=9, pod=f"{GANG}-0", rank=0), lines
    assert set(drain.stopped) == {0, 1} and not drain.unread, lines
    assert "rank 0 saved step 7 (it had done step 9)" in lines[1], lines

    versions = seen["v1/pods"].named(f"{GANG}-0")
    marked = next(pod for pod in versions if pod["metadata"].get("deletionTimestamp"))
    assert marked["metadata"]["deletionGracePeriodSeconds"] == GRACE_SECONDS
    assert marked["status"]["phase"] == "Running"  # the apiserver only marks it: the kubelet stops it
    stopped = next(pod for pod in versions if pod["status"].get("phase") == "Failed")
    assert stopped["metadata"].get("deletionTimestamp"), "terminated before it was deleted"
    assert (terminated(stopped)["exitCode"], json.loads(terminated(stopped)["message"])) == (143, REPORT)

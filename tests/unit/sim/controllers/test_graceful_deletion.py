"""A graceful pod delete on the emulator (``graceful_pod_deletion=True``), seen through its store: the
kubelet sends the member's local process SIGTERM, honours ``terminationGracePeriodSeconds`` (simulated
seconds) before SIGKILL, and the pod's last state carries the termination message the process wrote
while it terminated, before the pod is removed."""

from __future__ import annotations

from typing import Any

from gang_sim.testing.eventually import eventually
from gang_sim.testing.harness import ClusterHarness
from gang_sim.world.scenario import load_scenario

SAVES_ON_SIGTERM = """
import os, signal, sys, time
path = os.environ["GANG_SIM_TERMINATION_MESSAGE_PATH"]
def stop(signum, frame):
    with open(path, "w") as file:
        file.write('{"checkpoint_step": 7}')
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
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


def _pod(name: str, code: str, grace: int) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "python:3.11-slim",
        "command": ["python", "-c", code],
        "resources": {"requests": {"cpu": "100m"}},
    }
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace, "containers": [container]},
    }


def _terminated(obj: dict[str, Any]) -> dict[str, Any]:
    statuses = (obj.get("status") or {}).get("containerStatuses") or [{}]
    return dict((statuses[0].get("state") or {}).get("terminated") or {})


def test_a_graceful_delete_gives_sigterm_the_grace_period_and_records_the_message_written_meanwhile() -> None:
    with ClusterHarness(load_scenario("small"), graceful_pod_deletion=True) as cluster:
        store = cluster.store
        last_seen: dict[str, dict[str, Any]] = {}

        def record(event_type: str, resource: str, obj: dict[str, Any]) -> None:
            if resource == "v1/pods":
                last_seen[obj["metadata"]["name"]] = obj

        cluster.run(lambda: store.subscribe(record))
        cluster.create("v1/pods", _pod("saves", SAVES_ON_SIGTERM, grace=20), namespace="default")
        cluster.create("v1/pods", _pod("stubborn", IGNORES_SIGTERM, grace=20), namespace="default")

        def log_of(name: str) -> str:
            return str(cluster.run(lambda: store.logs.read("default", name, "main")))

        def started_then_deleted(name: str) -> None:
            eventually(lambda: "ready" in log_of(name), timeout=30, what=f"{name} running", interval=0.1)
            cluster.run(lambda: store.delete("v1/pods", name, "default"))

        started_then_deleted("saves")
        started_then_deleted("stubborn")

        def names() -> set[str]:
            return {item["metadata"]["name"] for item in cluster.objects("v1/pods")}

        eventually(lambda: "saves" not in names(), timeout=30, what="the pod that stopped on SIGTERM removed")
        saved = _terminated(last_seen["saves"])
        assert (saved["exitCode"], saved["message"]) == (143, '{"checkpoint_step": 7}')
        assert last_seen["saves"]["status"]["phase"] == "Failed"

        stubborn = next(item for item in cluster.objects("v1/pods") if item["metadata"]["name"] == "stubborn")
        assert stubborn["metadata"]["deletionGracePeriodSeconds"] == 20
        assert not _terminated(stubborn)  # still running: the grace period is simulated time, not yet over
        cluster.advance(19)
        assert "stubborn" in names()
        cluster.advance(2)
        eventually(lambda: "stubborn" not in names(), timeout=30, what="the stubborn pod removed after SIGKILL")
        assert _terminated(last_seen["stubborn"])["exitCode"] == 137

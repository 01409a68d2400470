"""A pod delete on the emulator, seen through its store: a pod bound to a node stays (Terminating)
while its kubelet sends the local process SIGTERM, honours the grace period (simulated seconds)
before SIGKILL, and writes the pod's last state - with the termination message the process wrote
while it terminated - before it removes the pod. A simulated container stops at once unless
``sim.gang.dev/stop-seconds`` says otherwise; a second delete may only shorten the grace period; a
pod deleted while its node shuts down keeps the shutdown's stop and status."""

from __future__ import annotations

from typing import Any

import pytest

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
    with ClusterHarness(load_scenario("small")) as cluster:
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


class Recorder:
    """Every committed state of every pod, by name, in order (the watch's view)."""

    def __init__(self, cluster: ClusterHarness) -> None:
        self.cluster = cluster
        self.seen: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        cluster.run(lambda: cluster.store.subscribe(self.record))

    def record(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource == "v1/pods":
            self.seen.setdefault(obj["metadata"]["name"], []).append((event_type, obj))

    def names(self) -> set[str]:
        return {item["metadata"]["name"] for item in self.cluster.objects("v1/pods")}

    def last(self, name: str) -> dict[str, Any]:
        return self.seen[name][-1][1]

    def removed(self, name: str) -> None:
        eventually(lambda: name not in self.names(), timeout=30, what=f"{name} removed", interval=0.05)


def _simulated(name: str, grace: int, **annotations: str) -> dict[str, Any]:
    body = _pod(name, "", grace)
    body["spec"]["containers"][0]["image"] = "registry.example/trainer:1"
    body["metadata"]["annotations"] = {"sim.gang.dev/start-seconds": "0", **annotations}
    return body


def _start(cluster: ClusterHarness, body: dict[str, Any]) -> None:
    """Create the local-process pod ``body`` and wait until its process printed "ready"."""
    name = body["metadata"]["name"]
    cluster.create("v1/pods", body, namespace="default")

    def ready() -> bool:
        return "ready" in cluster.run(lambda: cluster.store.logs.read("default", name, "main"))

    eventually(ready, timeout=30, what=f"{name} running", interval=0.1)


def _running(cluster: ClusterHarness, name: str) -> None:
    def phase() -> str:
        found = [item for item in cluster.objects("v1/pods") if item["metadata"]["name"] == name]
        return str((found[0].get("status") or {}).get("phase")) if found else ""

    eventually(lambda: phase() == "Running", timeout=30, what=f"{name} running", interval=0.05)


def test_a_simulated_container_stops_at_sigterm_at_once_and_its_status_comes_before_its_removal() -> None:
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = Recorder(cluster)
        cluster.create("v1/pods", _simulated("quick", 30, **{"sim.gang.dev/termination-message": "bye"}), "default")
        _running(cluster, "quick")
        terminating = cluster.run(lambda: cluster.store.delete("v1/pods", "quick", "default"))
        assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30  # marked, not removed
        pods.removed("quick")  # without advancing the clock: it stopped at SIGTERM
        events = [event for event, _ in pods.seen["quick"]]
        assert events[-1] == "DELETED" and events[-2] == "MODIFIED"
        stopped = pods.seen["quick"][-2][1]
        assert stopped["status"]["phase"] == "Failed"
        assert (_terminated(stopped)["exitCode"], _terminated(stopped)["message"]) == (143, "bye")


@pytest.mark.parametrize(("stop_seconds", "code"), [("5", 143), ("30", 137)], ids=["within-grace", "outlives-grace"])
def test_stop_seconds_keep_a_simulated_container_running_after_sigterm(stop_seconds: str, code: int) -> None:
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = Recorder(cluster)
        cluster.create("v1/pods", _simulated("slow", 20, **{"sim.gang.dev/stop-seconds": stop_seconds}), "default")
        _running(cluster, "slow")
        cluster.run(lambda: cluster.store.delete("v1/pods", "slow", "default"))
        cluster.advance(4)
        assert "slow" in pods.names() and not _terminated(pods.last("slow"))
        cluster.advance(17)
        pods.removed("slow")
        assert _terminated(pods.seen["slow"][-2][1])["exitCode"] == code


def test_the_deletes_grace_period_counts_and_a_later_delete_shortens_it() -> None:
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = Recorder(cluster)
        _start(cluster, _pod("stubborn", IGNORES_SIGTERM, grace=5))
        marked = cluster.run(lambda: cluster.store.delete("v1/pods", "stubborn", "default", grace_period_seconds=60))
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 60  # longer than its spec's 5 s
        cluster.advance(10)
        assert "stubborn" in pods.names() and not _terminated(pods.last("stubborn"))
        again = cluster.run(lambda: cluster.store.delete("v1/pods", "stubborn", "default", grace_period_seconds=90))
        assert again["metadata"]["deletionGracePeriodSeconds"] == 60  # a longer period changes nothing
        shorter = cluster.run(lambda: cluster.store.delete("v1/pods", "stubborn", "default", grace_period_seconds=3))
        assert shorter["metadata"]["deletionGracePeriodSeconds"] == 3
        cluster.advance(4)
        pods.removed("stubborn")
        assert _terminated(pods.seen["stubborn"][-2][1])["exitCode"] == 137


def test_a_container_that_exits_0_on_sigterm_ends_its_deleted_pod_succeeded() -> None:
    exits_cleanly = SAVES_ON_SIGTERM.replace("sys.exit(143)", "sys.exit(0)")
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = Recorder(cluster)
        _start(cluster, _pod("clean", exits_cleanly, grace=20))
        cluster.run(lambda: cluster.store.delete("v1/pods", "clean", "default"))
        pods.removed("clean")
        stopped = pods.seen["clean"][-2][1]
        assert stopped["status"]["phase"] == "Succeeded"  # every container exited 0
        assert _terminated(stopped)["message"] == '{"checkpoint_step": 7}'


def test_a_pod_deleted_while_its_node_shuts_down_keeps_the_shutdown_and_its_status() -> None:
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = Recorder(cluster)
        _start(cluster, _pod("saves", SAVES_ON_SIGTERM, grace=20))
        (bound,) = cluster.objects("v1/pods")
        cluster.preempt(bound["spec"]["nodeName"], notice_seconds=60, pod_grace_period_seconds=15)
        cluster.run(lambda: cluster.store.delete("v1/pods", "saves", "default"))
        pods.removed("saves")
        stopped = pods.seen["saves"][-2][1]
        assert stopped["status"]["reason"] == "Terminated"  # the node shutdown's status, not the delete's
        conditions = {item["type"]: item for item in stopped["status"]["conditions"]}
        assert conditions["DisruptionTarget"]["reason"] == "TerminationByKubelet"
        assert _terminated(stopped)["message"] == '{"checkpoint_step": 7}'

"""``state.terminated.message`` from ``terminationMessagePath``: local processes write their own file
(found through an env value equal to the path, ``GANG_SIM_TERMINATION_MESSAGE_PATH`` or the path in
the command), simulated containers take the ``sim.gang.dev/termination-message`` annotation, and
``FallbackToLogsOnError`` reports the log's end on failure - also when a preemption stops the pod."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from gang_sim.controllers.kubelet.simulated_runtime import RUN_SECONDS, TERMINATION_MESSAGE
from gang_sim.testing.eventually import eventually
from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import gpu_pod_spec, pod
from tests.integration.control_plane.conftest import gpu_scenario

IMAGE = "python:3.11"
CPU_POOL = {"name": "cpu", "zone": "us-central1-a", "minNodes": 1, "maxNodes": 1}


def _local_cluster(sim_cluster: Callable[..., SimCluster]) -> SimCluster:
    return sim_cluster(gpu_scenario(pool={"maxNodes": 0}, extra_pools=[CPU_POOL], localProcessImages=[IMAGE]))


def _process_pod(name: str, command: list[str], **container: Any) -> dict[str, Any]:
    body = {"name": "main", "image": IMAGE, "command": command, "resources": {"requests": {"cpu": "100m"}}}
    body.update(container)
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "containers": [body]}
    return pod(name, spec=spec)


def _python(code: str) -> list[str]:
    return [sys.executable, "-u", "-c", textwrap.dedent(code)]


def _terminated(cluster: SimCluster, name: str, timeout: float = 20.0) -> Any:
    def finished() -> Any:
        pod = cluster.core.read_namespaced_pod(name, "default")
        assert pod.status.phase in ("Succeeded", "Failed"), f"{name} is {pod.status.phase}"
        return pod.status.container_statuses[0].state.terminated

    return eventually(finished, timeout=timeout, what=f"{name} to finish")


def test_a_process_writes_json_where_an_env_value_equal_to_its_path_points(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    cluster = _local_cluster(sim_cluster)
    code = """
        import json, os
        assert os.environ["GANG_TERMINATION_MESSAGE_PATH"] == os.environ["GANG_SIM_TERMINATION_MESSAGE_PATH"]
        with open(os.environ["GANG_TERMINATION_MESSAGE_PATH"], "w") as file:
            json.dump({"step": 41, "checkpoint": "ok"}, file)
    """
    path = "/var/run/gang/termination-message"
    env = [{"name": "GANG_TERMINATION_MESSAGE_PATH", "value": path}]
    cluster.core.create_namespaced_pod(
        "default", _process_pod("writer", _python(code), env=env, terminationMessagePath=path)
    )
    terminated = _terminated(cluster, "writer")
    assert terminated.exit_code == 0
    assert json.loads(terminated.message) == {"step": 41, "checkpoint": "ok"}


def test_the_default_path_in_a_shell_command_and_the_log_fallback(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = _local_cluster(sim_cluster)
    cluster.core.create_namespaced_pod(
        "default", _process_pod("shell", ["sh", "-c", "echo done > /dev/termination-log"])
    )
    failing = _python("""
        import sys
        for index in range(100):
            print("line", index)
        sys.exit(3)
    """)
    cluster.core.create_namespaced_pod(
        "default", _process_pod("fails", failing, terminationMessagePolicy="FallbackToLogsOnError")
    )
    cluster.core.create_namespaced_pod("default", _process_pod("quiet", failing))
    assert _terminated(cluster, "shell").message == "done\n"
    fallback = _terminated(cluster, "fails")
    assert fallback.exit_code == 3
    assert fallback.message.splitlines() == [f"line {index}" for index in range(20, 100)]
    assert _terminated(cluster, "quiet").message is None


def test_a_simulated_container_reports_its_annotation(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"initialNodes": 1}))
    annotations = {RUN_SECONDS: "5", TERMINATION_MESSAGE: '{"step": 9}', "sim.gang.dev/exit-code": "2"}
    cluster.core.create_namespaced_pod("default", pod("sim", spec=gpu_pod_spec(), annotations=annotations))
    cluster.advance(10)
    terminated = cluster.core.read_namespaced_pod("sim", "default").status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.message) == (2, '{"step": 9}')


def test_a_preempted_process_reports_what_it_wrote_on_sigterm(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(
        gpu_scenario(pool={"maxNodes": 0}, extra_pools=[{**CPU_POOL, "spot": True}], localProcessImages=[IMAGE])
    )
    code = """
        import os, signal, sys, time
        def stop(*_):
            with open(os.environ["GANG_SIM_TERMINATION_MESSAGE_PATH"], "w") as file:
                file.write('{"checkpointStep": 12}')
            sys.exit(143)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(600)
    """
    cluster.core.create_namespaced_pod("default", _process_pod("spot", _python(code)))
    eventually(lambda: "ready" in cluster.log("spot"), timeout=20, what="spot ready (its SIGTERM handler set)")
    cluster.harness.preempt(cluster.core.read_namespaced_pod("spot", "default").spec.node_name)
    terminated = _terminated(cluster, "spot")
    assert (terminated.exit_code, terminated.message) == (143, '{"checkpointStep": 12}')

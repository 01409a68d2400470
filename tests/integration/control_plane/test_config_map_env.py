"""Env from a ConfigMap (``valueFrom.configMapKeyRef``), as a real kubelet handles it: a container
whose ConfigMap or key is missing waits in ``CreateContainerConfigError`` with upstream's message,
is retried after the pod-sync backoff (10-15 s), and starts once the value exists - in the simulated
runtime and in the local-process runtime, where the process gets the value."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from gang_sim.testing.eventually import eventually
from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import pod
from tests.integration.control_plane.conftest import gpu_scenario

WORLD = {"name": "world", "key": "size"}
LOCAL_IMAGE = "python:3.11"
CPU_POOL = {"name": "cpu", "zone": "us-central1-a", "minNodes": 1, "maxNodes": 1}


def _pod(
    name: str,
    *,
    reference: dict[str, Any] = WORLD,
    image: str = "busybox",
    command: list[str] | None = None,
    restart: str = "Never",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "resources": {"requests": {"cpu": "100m"}},
        "env": [
            {"name": "GANG_NAME", "value": "g"},
            {"name": "WORLD_SIZE", "valueFrom": {"configMapKeyRef": reference}},
        ],
    }
    if command:
        container["command"] = command
    return pod(name, spec={"restartPolicy": restart, "containers": [container]}, annotations=annotations or {})


def _config_map(cluster: SimCluster, data: dict[str, str], name: str = "world") -> None:
    cluster.core.create_namespaced_config_map(
        "default", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    )


def _state(cluster: SimCluster, name: str) -> tuple[str, Any]:
    pod = cluster.core.read_namespaced_pod(name, "default")
    return pod.status.phase, pod.status.container_statuses[0].state


def _waiting(cluster: SimCluster, name: str) -> tuple[str, str]:
    phase, state = _state(cluster, name)
    assert phase == "Pending" and state.waiting is not None, (phase, state)
    return state.waiting.reason, state.waiting.message


def _failed_messages(cluster: SimCluster, name: str) -> list[str]:
    return [event.message for event in cluster.events("Failed") if event.involved_object.name == name]


def test_missing_config_map_then_key_hold_the_container_until_both_exist(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    cluster = sim_cluster("small")
    cluster.core.create_namespaced_pod("default", _pod("member"))
    cluster.advance(3)  # bound, "image pulled" after 2 s, then the env cannot be built
    assert _waiting(cluster, "member") == ("CreateContainerConfigError", 'configmap "world" not found')
    assert _failed_messages(cluster, "member") == ['Error: configmap "world" not found']
    cluster.advance(30)  # retried twice or more: the same error is not reported again
    assert _failed_messages(cluster, "member") == ['Error: configmap "world" not found']

    _config_map(cluster, {"other": "1"})
    cluster.advance(16)  # the next retry finds the ConfigMap but not the key
    assert _waiting(cluster, "member") == (
        "CreateContainerConfigError",
        "couldn't find key size in ConfigMap default/world",
    )
    cluster.core.patch_namespaced_config_map("world", "default", {"data": {"size": "2"}})
    cluster.advance(1)  # the kubelet does not react to the ConfigMap; it waits for its backoff
    assert _waiting(cluster, "member")[0] == "CreateContainerConfigError"
    cluster.advance(15)
    phase, state = _state(cluster, "member")
    assert phase == "Running" and state.running is not None
    assert len(_failed_messages(cluster, "member")) == 2


def test_an_optional_reference_to_a_missing_config_map_starts_at_once(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster("small")
    cluster.core.create_namespaced_pod("default", _pod("optional", reference={**WORLD, "optional": True}))
    cluster.advance(3)
    assert _state(cluster, "optional")[0] == "Running"
    assert _failed_messages(cluster, "optional") == []


def test_a_restart_waits_again_when_the_config_map_is_gone(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster("small")
    _config_map(cluster, {"size": "2"})
    annotations = {"sim.gang.dev/run-seconds": "5", "sim.gang.dev/exit-code": "1"}
    cluster.core.create_namespaced_pod("default", _pod("restarts", restart="OnFailure", annotations=annotations))
    cluster.advance(3)
    assert _state(cluster, "restarts")[0] == "Running"
    cluster.core.delete_namespaced_config_map("world", "default")
    cluster.advance(5)  # exits 1; the restart cannot build the env
    assert _waiting(cluster, "restarts") == ("CreateContainerConfigError", 'configmap "world" not found')
    _config_map(cluster, {"size": "2"})
    cluster.advance(15)
    pod = cluster.core.read_namespaced_pod("restarts", "default")
    assert pod.status.phase == "Running" and pod.status.container_statuses[0].restart_count == 1


def _local_scenario() -> Any:
    return gpu_scenario(pool={"maxNodes": 0}, extra_pools=[CPU_POOL], localProcessImages=[LOCAL_IMAGE])


def _wait_for_phase(cluster: SimCluster, name: str, phases: set[str], timeout: float = 30.0) -> str:
    def reached() -> str:
        phase = _state(cluster, name)[0]
        assert phase in phases, f"{name} is {phase}"
        return str(phase)

    return eventually(reached, timeout=timeout, what=f"{name} to be {' or '.join(sorted(phases))}")


def test_a_local_process_starts_only_once_its_config_map_value_exists(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(_local_scenario())
    code = "import os; print('world', os.environ['WORLD_SIZE'], os.environ['GANG_NAME'])"
    local = _pod("local", image=LOCAL_IMAGE, command=[sys.executable, "-c", code])
    cluster.core.create_namespaced_pod("default", local)
    cluster.advance(1)
    assert _waiting(cluster, "local") == ("CreateContainerConfigError", 'configmap "world" not found')
    time.sleep(0.5)  # real time: a process started by mistake would have printed by now
    assert _state(cluster, "local")[0] == "Pending"
    _config_map(cluster, {"size": "2"})
    cluster.advance(16)
    assert _wait_for_phase(cluster, "local", {"Succeeded", "Failed"}) == "Succeeded"
    log = cluster.core.read_namespaced_pod_log("local", "default", _preload_content=False).data.decode()
    assert log.strip() == "world 2 g"

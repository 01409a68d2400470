"""The real-tier harness itself (``gang_sim.testing.real``): what a MultiKueue manager and its workers,
or a topology-aware gang, will need from it.

- Two complete control planes (Kueue and the cluster-autoscaler in each) started at once in one
  process are apart: their own ports, directories, objects and Kueue; each autoscaler, asked by a
  best-effort-atomic ProvisioningRequest, grows its own cluster's GPU pool, and every node it adds
  carries its own ``kubernetes.io/hostname`` (its name, as a kubelet would label it); stopped, they
  leave no process or directory behind and hold no port (``tests/unit/sim/testing/test_ports.py``
  shows a released port is free).
- A start that fails half-way (a component exiting at once) fails with that component's log and
  leaves no process or directory behind.

Upstream: the kwok provider's ``IncreaseSize`` copies the template's labels onto every node it adds
(sigs.k8s.io/cluster-autoscaler ``pkg/cloudprovider/kwok/kwok_nodegroups.go``); a ProvisioningRequest
of ``best-effort-atomic-scale-up.autoscaling.x-k8s.io`` is ``Provisioned=True`` once the scale-up is
issued (``pkg/provisioningrequest/besteffortatomic/provisioning_class.go``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from gang_sim.testing.real import Binaries, RealCluster, find
from gang_sim.testing.real.processes import ComponentFailed
from gang_sim.world.cloud import HOSTNAME_LABEL, POOL_LABEL
from gang_sim.world.scenario import load_scenario
from tests.real.backends import started_together, wait_for

pytestmark = pytest.mark.timeout(600)
SCENARIO = Path(__file__).with_name("scenarios") / "gpu.yaml"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
GPU_NODES = 2


def provisioning_request(name: str) -> list[dict[str, Any]]:
    """A PodTemplate of one GPU member and a best-effort-atomic ProvisioningRequest for ``GPU_NODES`` of them."""
    template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "template": {
            "spec": {
                "nodeSelector": {POOL_LABEL: "gpu"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [
                    {"name": "main", "image": "train:sim", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ],
            }
        },
    }
    request = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"provisioningClassName": ATOMIC, "podSets": [{"count": GPU_NODES, "podTemplateRef": {"name": name}}]},
    }
    return [template, request]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((item for item in obj.get("status", {}).get("conditions", []) if item["type"] == kind), {})


def once_true(read: Callable[[], dict[str, Any]], kind: str) -> Callable[[], dict[str, Any] | None]:
    """A check for :func:`wait_for`: the object ``read`` returns, once its condition ``kind`` is True."""

    def check() -> dict[str, Any] | None:
        obj = read()
        return obj if condition(obj, kind).get("status") == "True" else None

    return check


def gpu_nodes(cluster: RealCluster) -> list[dict[str, Any]]:
    """The nodes of the pool the requests name (the scenario's other GPU pools are not asked)."""
    return [node for node in cluster.get("nodes")["items"] if node["metadata"]["labels"].get(POOL_LABEL) == "gpu"]


def ready_gpu_nodes(cluster: RealCluster) -> list[dict[str, Any]] | None:
    """The GPU nodes once ``GPU_NODES`` of them are Ready."""
    nodes = [node for node in gpu_nodes(cluster) if condition(node, "Ready").get("status") == "True"]
    return nodes if len(nodes) >= GPU_NODES else None


def leftover_processes(directory: Path) -> list[str]:
    """Command lines of running processes that name ``directory`` (every component's does)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            arguments = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(str(directory) in argument for argument in arguments):
            found.append(" ".join(arguments))
    return found


def is_free(port: int) -> bool:
    """Whether a socket without ``SO_REUSEADDR`` may bind ``port``: none may while it is held or served
    (nor while a closed connection of it lingers in TIME_WAIT, so this says nothing after a stop)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def assert_apart(first: RealCluster, second: RealCluster) -> None:
    assert first.ports and second.ports
    assert not set(first.ports) & set(second.ports)
    assert not any(is_free(port) for port in (*first.ports, *second.ports))
    assert first.url != second.url and first.directory != second.directory
    first.apply([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "only-here", "namespace": "default"}}])
    assert second.kubectl("get", "configmap", "only-here", "-n", "default", "--ignore-not-found") == ""
    for cluster in (first, second):
        # Each Kueue reconciles its own cluster's queues (its webhooks admitted them at start).
        queue = partial(cluster.get, "clusterqueues.kueue.x-k8s.io", "team")
        wait_for(once_true(queue, "Active"), timeout=120, what=f"ClusterQueue team Active at {cluster.url}")


def assert_each_grows_its_own_pool_with_distinct_hostnames(clusters: tuple[RealCluster, ...]) -> None:
    for index, cluster in enumerate(clusters):
        assert gpu_nodes(cluster) == []
        cluster.apply(provisioning_request(f"harness-{index}"))
    for index, cluster in enumerate(clusters):
        read = partial(cluster.get, "provisioningrequests.autoscaling.x-k8s.io", f"harness-{index}", "default")
        request = wait_for(once_true(read, "Provisioned"), timeout=180, what=f"harness-{index} Provisioned")
        assert condition(request, "Provisioned")["reason"] == "CapacityIsProvisioned"
    grown = [wait_for(partial(ready_gpu_nodes, cluster), timeout=120, what="GPU nodes Ready") for cluster in clusters]
    names = [{node["metadata"]["name"] for node in nodes} for nodes in grown]
    assert [len(each) for each in names] == [GPU_NODES] * len(clusters) and not names[0] & names[1]
    for nodes in grown:
        hostnames = [node["metadata"]["labels"].get(HOSTNAME_LABEL) for node in nodes]
        assert hostnames == [node["metadata"]["name"] for node in nodes], hostnames
        assert len(set(hostnames)) == len(hostnames)


def test_two_control_planes_at_once_are_apart_and_each_autoscaler_adds_nodes_with_their_own_hostnames() -> None:
    scenario = load_scenario(str(SCENARIO))
    with started_together(RealCluster(scenario), RealCluster(scenario)) as clusters:
        first, second = clusters
        assert_apart(first, second)
        assert_each_grows_its_own_pool_with_distinct_hostnames(clusters)
        directories = [cluster.directory for cluster in clusters]
    for cluster, directory in zip(clusters, directories, strict=True):
        assert cluster.ports == () and cluster.components == []
        assert not directory.exists()
        assert leftover_processes(directory) == []


def failing_autoscaler(tmp_path: Path) -> Binaries:
    """The built binaries, but a cluster-autoscaler that exits at once with a message, as a bad flag makes it."""
    built = find()
    root = tmp_path / "binaries"
    (root / "bin").mkdir(parents=True)
    (root / "manifests").symlink_to(built.manifests)
    for binary in built.bin.iterdir():
        (root / "bin" / binary.name).symlink_to(binary)
    autoscaler = root / "bin" / "cluster-autoscaler"
    autoscaler.unlink()
    autoscaler.write_text("#!/bin/sh\necho 'F1205 unknown flag: --cloud-provider' >&2\nexit 255\n")
    autoscaler.chmod(0o755)
    return Binaries(root)


def test_a_start_failing_half_way_names_the_component_and_leaves_nothing_running(tmp_path: Path) -> None:
    cluster = RealCluster(load_scenario(str(SCENARIO)), binaries=failing_autoscaler(tmp_path), kueue=False)
    with pytest.raises(ComponentFailed, match="cluster-autoscaler exited during start") as failed:
        cluster.start()
    assert "unknown flag: --cloud-provider" in str(failed.value)
    directory = Path(str(failed.value).split("the last lines of ", 1)[1].split(":", 1)[0]).parent
    assert directory.name.startswith("gang-real-cluster-") and not directory.exists()
    assert leftover_processes(directory) == []
    assert cluster.components == [] and cluster.ports == ()

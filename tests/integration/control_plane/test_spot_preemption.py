"""Spot preemption as GKE does it: termination taint and ~30 s notice, pods stopped by graceful node
shutdown (Failed/Terminated, DisruptionTarget), the node deleted and its pods collected; scheduled by
the scenario's ``preemptions`` or on demand (``POST /_sim/preemptions``, ``harness.preempt``)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.preemption import (
    SHUTDOWN_MESSAGE,
    SHUTDOWN_REASON,
    TERMINATION_BY_KUBELET,
    TERMINATION_TAINT,
)
from gang_sim.testing.eventually import eventually
from gang_sim.testing.pytest_plugin import SimCluster
from gang_sim.world.scenario_fields import ScenarioError
from tests.builders import GPU_TAINT, gpu_pod_spec, pod
from tests.integration.control_plane.conftest import exits_on_sigterm, gpu_scenario

SPOT_POOL = {"spot": True, "initialNodes": 2, "maxNodes": 4}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return pod(name, spec=gpu_pod_spec(**spec))


def _node_of(cluster: SimCluster, name: str) -> str:
    return str(cluster.core.read_namespaced_pod(name, "default").spec.node_name)


def _nodes(cluster: SimCluster) -> set[str]:
    return {node.metadata.name for node in cluster.core.list_node().items}


def _noticed(node: Any) -> bool:
    return any(taint.key == TERMINATION_TAINT["key"] for taint in node.spec.taints or [])


def _assert_terminated_by_shutdown(pod: Any) -> None:
    assert (pod.status.phase, pod.status.reason, pod.status.message) == ("Failed", SHUTDOWN_REASON, SHUTDOWN_MESSAGE)
    disruption = {item.type: item for item in pod.status.conditions}["DisruptionTarget"]
    assert (disruption.status, disruption.reason, disruption.message) == (
        "True",
        TERMINATION_BY_KUBELET,
        SHUTDOWN_MESSAGE,
    )


def _status_writes(cluster: SimCluster, name: str) -> Callable[[], list[tuple[str, bool, list[str]]]]:
    """Start recording every stored version of pod ``name`` as ``(phase, has DisruptionTarget,
    container states)``; the returned function stops recording and gives the list, in write order."""
    seen: list[tuple[str, bool, list[str]]] = []

    def record(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        if resource != "v1/pods" or obj["metadata"]["name"] != name or event_type == "DELETED":
            return
        status = obj.get("status") or {}
        disrupted = any(item["type"] == "DisruptionTarget" for item in status.get("conditions") or [])
        states = [next(iter(item.get("state") or {"none": {}})) for item in status.get("containerStatuses") or []]
        seen.append((str(status.get("phase")), disrupted, states))

    store = cluster.harness.store
    unsubscribe = cluster.harness.run(lambda: store.subscribe(record))

    def stop() -> list[tuple[str, bool, list[str]]]:
        cluster.harness.run(unsubscribe)
        return seen

    return stop


def _assert_condition_comes_with_the_terminal_phase(writes: list[tuple[str, bool, list[str]]]) -> None:
    """Upstream's order (``mergePodStatus`` in ``pkg/kubelet/status/status_manager.go``): every write
    while the containers run is ``Running`` without ``DisruptionTarget``; the write that adds the
    condition is the terminal one, with the containers terminated."""
    first = next(index for index, (_, disrupted, _) in enumerate(writes) if disrupted)
    assert writes[first] == ("Failed", True, ["terminated"]), writes
    assert all(write == ("Running", False, ["running"]) for write in writes[:first]), writes


def test_a_scenario_preemption_stops_the_pods_then_deletes_the_node(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool=SPOT_POOL, preemptions=[{"at": 100, "pool": "gpu"}]))
    cluster.core.create_namespaced_pod("default", _pod("a"))
    cluster.core.create_namespaced_pod("default", _pod("b"))
    cluster.advance(10)
    first, second = _node_of(cluster, "a"), _node_of(cluster, "b")
    assert first != second
    writes = {name: _status_writes(cluster, name) for name in ("a", "b")}
    cluster.advance(90)
    nodes = {node.metadata.name: node for node in cluster.core.list_node().items}
    noticed = [name for name, node in nodes.items() if _noticed(node)]
    assert len(noticed) == 1
    node = nodes[noticed[0]]
    taints = [(taint.key, taint.effect) for taint in node.spec.taints]
    assert taints == [("nvidia.com/gpu", "NoSchedule"), (TERMINATION_TAINT["key"], "NoSchedule")]
    ready = {item.type: item for item in node.status.conditions}["Ready"]
    assert (ready.status, ready.message) == ("False", "node is shutting down")
    victim, survivor = ("a", "b") if noticed[0] == first else ("b", "a")
    _assert_terminated_by_shutdown(cluster.core.read_namespaced_pod(victim, "default"))
    terminated = cluster.core.read_namespaced_pod(victim, "default").status.container_statuses[0].state.terminated
    assert terminated.exit_code == 143
    _assert_condition_comes_with_the_terminal_phase(writes[victim]())
    assert cluster.core.read_namespaced_pod(survivor, "default").status.phase == "Running"
    assert [event.message for event in cluster.events("NodeShutdown")] == ["Shutdown manager detected shutdown event"]
    # a pod created during the notice is not placed on the tainted node
    cluster.core.create_namespaced_pod("default", _pod("late"))
    cluster.advance(29)
    assert noticed[0] in _nodes(cluster)
    assert _node_of(cluster, "late") == "None"
    cluster.advance(1)
    assert noticed[0] not in _nodes(cluster)
    with pytest.raises(ApiException) as gone:
        cluster.core.read_namespaced_pod(victim, "default")
    assert gone.value.status == 404
    records = cluster.harness.control.running.plane.cloud.nodes  # type: ignore[union-attr]
    assert records[noticed[0]].deleted_at == 130


def test_on_demand_preemption_of_a_chosen_node_and_capacity_replaced(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"spot": True, "initialNodes": 1, "maxNodes": 2}))
    cluster.core.create_namespaced_pod("default", _pod("a"))
    cluster.advance(5)
    node = _node_of(cluster, "a")
    assert cluster.harness.preempt(node, notice_seconds=20, pod_grace_period_seconds=10) == [node]
    _assert_terminated_by_shutdown(cluster.core.read_namespaced_pod("a", "default"))
    with pytest.raises(ApiError) as again:
        cluster.harness.preempt(node)
    assert again.value.code == 409
    cluster.advance(20)
    assert node not in _nodes(cluster)
    # the retry's pod is pending: the autoscaler replaces the capacity
    cluster.core.create_namespaced_pod("default", _pod("a-retry"))
    cluster.advance(120)
    replaced = _node_of(cluster, "a-retry")
    assert replaced not in ("None", node)


def test_preemption_later_and_by_http(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario(pool=SPOT_POOL))

    def call(method: str, body: object | None = None) -> tuple[int, Any]:
        try:
            response = cluster.api.call_api(
                "/_sim/preemptions",
                method,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                header_params={"Content-Type": "application/json"},
                _request_timeout=10,
            )
        except ApiException as error:
            return int(error.status), json.loads(error.body)
        return int(response.status), json.loads(response.data)

    status, answer = call("POST", {"pool": "gpu", "count": 2, "at": 50})
    assert (status, answer["applied"], answer["nodes"]) == (201, False, [])
    assert call("POST", {"pool": "nope"})[0] == 400
    assert call("POST", {"pool": "gpu", "node": "x"})[0] == 400
    assert call("POST", {"node": "missing"})[0] == 404
    assert call("POST", {"pool": "gpu", "noticeSeconds": 10, "podGracePeriodSeconds": 20})[0] == 400
    cluster.advance(49)
    assert not any(_noticed(node) for node in cluster.core.list_node().items)
    cluster.advance(1)
    status, listing = call("GET")
    (record,) = listing["preemptions"]
    assert record["applied"] and len(record["nodes"]) == 2
    cluster.advance(30)
    assert _nodes(cluster).isdisjoint(record["nodes"])


def test_a_scenario_preemption_is_validated() -> None:
    with pytest.raises(ScenarioError) as error:
        gpu_scenario(preemptions=[{"at": 10, "pool": "missing"}])
    assert error.value.field == "preemptions[0].pool"
    with pytest.raises(ScenarioError) as error:
        gpu_scenario(preemptions=[{"at": 10, "node": "n", "count": 2}])
    assert error.value.field == "preemptions[0].count"


LOCAL_POOL = {"name": "cpu", "zone": "us-central1-a", "minNodes": 1, "maxNodes": 1, "spot": True}
IMAGE = "python:3.11"


def _process_pod(name: str, code: str, grace: int) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": IMAGE,
        "command": [sys.executable, "-u", "-c", textwrap.dedent(code)],
        "resources": {"requests": {"cpu": "100m"}},
    }
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace, "containers": [container]}
    return pod(name, spec=spec)


def test_local_processes_get_sigterm_then_sigkill_after_the_capped_grace(
    sim_cluster: Callable[..., SimCluster],
) -> None:
    cluster = sim_cluster(gpu_scenario(pool={"maxNodes": 0}, extra_pools=[LOCAL_POOL], localProcessImages=[IMAGE]))
    ignores = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(600)
    """
    cluster.core.create_namespaced_pod("default", _process_pod("saves", exits_on_sigterm("checkpoint saved"), grace=60))
    cluster.core.create_namespaced_pod("default", _process_pod("ignores", ignores, grace=60))

    eventually(
        lambda: all("ready" in cluster.log(name) for name in ("saves", "ignores")),
        timeout=20.0,
        what="both processes ready (their SIGTERM handlers set)",
    )
    node = _node_of(cluster, "saves")
    writes = {name: _status_writes(cluster, name) for name in ("saves", "ignores")}
    cluster.harness.preempt(node, pod_grace_period_seconds=15)
    eventually(
        lambda: cluster.core.read_namespaced_pod("saves", "default").status.phase == "Failed",
        timeout=20.0,
        what="saves Failed",
    )
    saved = cluster.core.read_namespaced_pod("saves", "default")
    _assert_terminated_by_shutdown(saved)
    assert saved.status.container_statuses[0].state.terminated.exit_code == 0
    assert "checkpoint saved" in cluster.log("saves")
    cluster.advance(14)
    stopping = cluster.core.read_namespaced_pod("ignores", "default").status  # SIGTERM ignored, grace not over
    assert (stopping.phase, stopping.reason, stopping.message) == ("Running", None, None)
    assert "DisruptionTarget" not in {item.type for item in stopping.conditions}
    assert stopping.container_statuses[0].state.running is not None
    cluster.advance(1)  # the budget (15 s) caps the pod's 60 s grace period: SIGKILL
    eventually(
        lambda: cluster.core.read_namespaced_pod("ignores", "default").status.phase == "Failed",
        timeout=20.0,
        what="ignores Failed",
    )
    killed = cluster.core.read_namespaced_pod("ignores", "default")
    _assert_terminated_by_shutdown(killed)
    assert killed.status.container_statuses[0].state.terminated.exit_code == 137
    for name in ("saves", "ignores"):
        _assert_condition_comes_with_the_terminal_phase(writes[name]())


# (cloud, spot node labels, spot node taints beside the GPU taint, on-demand node labels, reclaim taint)
CLOUD_NODES = [
    pytest.param("gke", {"cloud.google.com/gke-spot": "true"}, [], {}, TERMINATION_TAINT["key"], id="gke"),
    pytest.param(
        "eks",
        {"eks.amazonaws.com/capacityType": "SPOT"},
        [],
        {"eks.amazonaws.com/capacityType": "ON_DEMAND"},
        "aws-node-termination-handler/spot-itn",
        id="eks",
    ),
    pytest.param(
        "karpenter",
        {"karpenter.sh/capacity-type": "spot"},
        [],
        {"karpenter.sh/capacity-type": "on-demand"},
        "karpenter.sh/disrupted",
        id="karpenter",
    ),
    pytest.param(
        "aks",
        {"kubernetes.azure.com/scalesetpriority": "spot"},
        [("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule")],
        {},
        None,
        id="aks",
    ),
]


@pytest.mark.parametrize(("cloud", "spot_labels", "spot_taints", "on_demand_labels", "reclaim"), CLOUD_NODES)
def test_each_cloud_labels_its_pools_and_taints_a_reclaimed_node_its_way(
    sim_cluster: Callable[..., SimCluster],
    cloud: str,
    spot_labels: dict[str, str],
    spot_taints: list[tuple[str, str, str]],
    on_demand_labels: dict[str, str],
    reclaim: str | None,
) -> None:
    on_demand = {"name": "gpu-od", "zone": "us-central1-a", "cpu": "8", "memory": "32Gi", "initialNodes": 1}
    cluster = sim_cluster(gpu_scenario(cloud=cloud, pool=SPOT_POOL, extra_pools=[on_demand]))
    nodes = {node.metadata.name: node for node in cluster.core.list_node().items}
    by_pool: dict[str, list[Any]] = {}
    for node in nodes.values():
        by_pool.setdefault(node.metadata.labels["cloud.google.com/gke-nodepool"], []).append(node)
    for node in by_pool["gpu"]:
        assert spot_labels.items() <= node.metadata.labels.items()
        taints = [(taint.key, taint.value, taint.effect) for taint in node.spec.taints]
        assert taints == [(GPU_TAINT["key"], GPU_TAINT.get("value"), GPU_TAINT["effect"]), *spot_taints]
    for node in by_pool["gpu-od"]:
        assert on_demand_labels.items() <= node.metadata.labels.items()
        assert not set(spot_labels) & {
            key for key, value in node.metadata.labels.items() if spot_labels.get(key) == value
        }
    victim = by_pool["gpu"][0].metadata.name
    assert cluster.harness.preempt(victim, notice_seconds=20, pod_grace_period_seconds=10) == [victim]
    keys = [taint.key for taint in cluster.core.read_node(victim).spec.taints]
    assert keys == [GPU_TAINT["key"], *(key for key, _, _ in spot_taints), *([reclaim] if reclaim else [])]
    ready = {item.type: item for item in cluster.core.read_node(victim).status.conditions}["Ready"]
    assert (ready.status, ready.message) == ("False", "node is shutting down")
    cluster.advance(20)
    assert victim not in _nodes(cluster)


def test_a_scenario_names_a_known_cloud() -> None:
    with pytest.raises(ScenarioError, match="'azure' is no cloud"):
        gpu_scenario(cloud="azure")
    with pytest.raises(ScenarioError, match=r"nodePools\[0\].reservation"):
        gpu_scenario(cloud="eks", pool={"reservation": "r1", "maxNodes": 2})

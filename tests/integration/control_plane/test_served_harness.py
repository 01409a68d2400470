"""``ClusterHarness(served=True)``: the same harness over ``gang-sim serve`` in a subprocess.

The kubeconfig it writes reaches the served API, the clock and the bill come from ``/_sim/clock``,
a spot notice goes to ``/_sim/preemptions``, and what needs the store in this process is refused
by name; stopping ends the process and removes what the harness placed itself.
"""

from __future__ import annotations

import urllib.error
from pathlib import Path

import pytest
from kubernetes import client, config

from gang_sim.testing import ClusterHarness, eventually
from gang_sim.world.scenario import load_scenario


def test_a_served_scenario_answers_through_its_kubeconfig_and_control_endpoints(tmp_path: Path) -> None:
    log = tmp_path / "served.log"
    with ClusterHarness("small", time_scale=60, served=True, seed=3, log_path=log) as cluster:
        assert cluster.served is not None and cluster.url.startswith("https://127.0.0.1:")
        api = config.new_client_from_config(str(cluster.kubeconfig_path))
        assert cluster.token and cluster.token in str(api.configuration.api_key)
        try:
            nodes = client.CoreV1Api(api).list_node().items
        finally:
            api.close()
        assert {node.metadata.labels["cloud.google.com/gke-nodepool"] for node in nodes} <= {
            pool.name for pool in load_scenario("small").node_pools
        }
        started = cluster.now()
        eventually(lambda: cluster.now() > started, timeout=30, what="simulated time moving at 60x")
        assert cluster.gpu_seconds() >= 0
        with pytest.raises(urllib.error.HTTPError) as refused:
            cluster.preempt("no-such-node")
        assert refused.value.code == 404
        refused.value.close()  # the error holds the answer's socket
        with pytest.raises(RuntimeError, match="subprocess"):
            cluster.objects("v1/pods")
        with pytest.raises(RuntimeError, match="subprocess"):
            cluster.store  # noqa: B018  # the property raises
        with pytest.raises(TypeError, match="ManualClock"):
            cluster.advance(10)
        own = cluster.kubeconfig_path.parent
    assert not cluster.served.running()
    assert "ready: https://127.0.0.1:" in log.read_text()
    assert not own.exists()
    assert "exited" in cluster.describe()


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        pytest.param(
            {"scenario": load_scenario("small"), "time_scale": 60}, ValueError, "by name", id="scenario-object"
        ),
        pytest.param({"scenario": "small"}, ValueError, "ScaledClock", id="manual-clock"),
        pytest.param({"record_changes": True}, ValueError, "not recorded", id="record-changes"),
        pytest.param({"preload_crds": False}, TypeError, "preload_crds", id="in-process-option"),
    ],
)
def test_a_served_harness_refuses_what_only_an_in_process_emulator_has(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ClusterHarness(served=True, **arguments)

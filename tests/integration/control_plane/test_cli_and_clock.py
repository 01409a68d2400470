"""``gang-sim serve --scenario NAME --time-scale N``, ``gang-sim scenarios`` and ``/_sim/clock``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import pod
from tests.integration.control_plane.conftest import KUBECTL, gpu_scenario

GANG_SIM = [sys.executable, "-m", "gang_sim.cli"]


def _kubectl(kubeconfig: Path, *args: str, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=30,
        input=input_text,
        check=False,
    )


def test_scenarios_command_lists_named_scenarios() -> None:
    result = subprocess.run([*GANG_SIM, "scenarios"], capture_output=True, text=True, timeout=60, check=True)
    names = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert {"demo", "seed-cost"} <= set(names)


def test_bad_scenario_file_is_rejected_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodePools:\n- name: gpu\n  zone: a\n  gpusPerNode: 2\n  maxNodes: -1\n")
    result = subprocess.run(
        [*GANG_SIM, "serve", "--kubeconfig-out", str(tmp_path / "kc"), "--scenario", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "nodePools[0].gpuType: required when gpusPerNode > 0" in result.stderr


def test_serve_runs_the_demo_scenario_at_a_time_scale(tmp_path: Path) -> None:
    # At 30x the idle initial l4-a node is scaled down 20 s (600 simulated s) after start, long after
    # the node listing below; at 600x that was 1 s, less than kubectl's start-up on a loaded machine.
    kubeconfig = tmp_path / "kubeconfig"
    command = [*GANG_SIM, "serve", "--kubeconfig-out", str(kubeconfig), "--scenario", "demo", "--time-scale", "30"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as server:
        try:
            _exercise_demo_server(server, kubeconfig)
        finally:
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=30) == 0


def _exercise_demo_server(server: subprocess.Popen[str], kubeconfig: Path) -> None:
    assert server.stdout is not None
    assert server.stdout.readline().startswith("ready: https://127.0.0.1:")
    nodes = json.loads(_kubectl(kubeconfig, "get", "nodes", "-o", "json").stdout)["items"]
    assert sorted(node["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for node in nodes) == ["cpu", "l4-a"]
    clock = json.loads(_kubectl(kubeconfig, "get", "--raw", "/_sim/clock").stdout)
    assert clock["kind"] == "ScaledClock" and clock["timeScale"] == 30 and clock["scenario"] == "demo"
    quick = pod(
        "quick",
        spec={
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
        },
        annotations={"sim.gang.dev/run-seconds": "60"},
    )
    assert _kubectl(kubeconfig, "apply", "-f", "-", input_text=json.dumps(quick)).returncode == 0
    # 2 s start + 60 s run = 62 simulated seconds = ~2 s of real time at scale 30.
    waited = _kubectl(kubeconfig, "wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/quick", "--timeout=20s")
    assert waited.returncode == 0, waited.stderr
    refused = _kubectl(kubeconfig, "create", "--raw", "/_sim/clock", "-f", "-", input_text='{"advance": 5}')
    assert refused.returncode != 0  # a scaled clock cannot be advanced by hand


def test_clock_endpoint_advances_a_manual_clock(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(gpu_scenario())
    kubeconfig = cluster.harness.kubeconfig_path
    before = json.loads(_kubectl(kubeconfig, "get", "--raw", "/_sim/clock").stdout)
    assert before["kind"] == "ManualClock" and before["now"] == 0
    after = json.loads(
        _kubectl(kubeconfig, "create", "--raw", "/_sim/clock", "-f", "-", input_text='{"advance": 90}').stdout
    )
    assert after["now"] == 90
    assert cluster.harness.now() == 90
    bad = _kubectl(kubeconfig, "create", "--raw", "/_sim/clock", "-f", "-", input_text='{"advance": -1}')
    assert bad.returncode != 0


@pytest.mark.parametrize("scale", [0.0, -2.0])
def test_time_scale_must_be_positive(tmp_path: Path, scale: float) -> None:
    result = subprocess.run(
        [*GANG_SIM, "serve", "--kubeconfig-out", str(tmp_path / "kc"), "--time-scale", str(scale)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "--time-scale" in result.stderr

"""Inputs of the control-plane tests, which run on the ``sim_cluster`` fixture
(:mod:`gang_sim.testing.pytest_plugin`): the emulator with the simulated control plane
on a ManualClock, observed with the real ``kubernetes`` client. Tests create objects through the API,
move simulated time with ``cluster.advance(seconds)`` (no real sleeps) and read state back through the API.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gang_sim.testing.pytest_plugin import SimCluster
from gang_sim.world.scenario import Scenario, parse_scenario
from tests.builders import GPU_TAINT, gpu_pod_spec

KUBECTL = str(Path(sys.executable).parent / "kubectl")


def gpu_scenario(**overrides: Any) -> Scenario:
    """One pool of 1-GPU nodes (0 at start, up to 8, 60 s to provision), scaling 1 node per minute."""
    pool = {
        "name": "gpu",
        "zone": "us-central1-a",
        "gpuType": "nvidia-l4",
        "gpusPerNode": 1,
        "cpu": "8",
        "memory": "32Gi",
        "maxNodes": 8,
        "provisioningDelaySeconds": 60,
        "taints": [GPU_TAINT],
    }
    pool.update(overrides.pop("pool", {}))
    document: dict[str, Any] = {"name": "gpu-test", "nodePools": [pool, *overrides.pop("extra_pools", [])]}
    document.update(overrides)
    return parse_scenario(document)


def dws_cluster(sim_cluster: Callable[..., SimCluster]) -> SimCluster:
    """A cluster with one queued-provisioning pool ``dws`` (8-GPU nodes, at most 4, 120 s to boot) and
    the PodTemplate ``dws-worker``: one pod that takes a whole node of it."""
    scenario = gpu_scenario(
        pool={
            "name": "dws",
            "queuedProvisioning": True,
            "gpusPerNode": 8,
            "maxNodes": 4,
            "provisioningDelaySeconds": 120,
        }
    )
    cluster = sim_cluster(scenario)
    spec = gpu_pod_spec(nodeSelector={"cloud.google.com/gke-nodepool": "dws"})
    spec["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": "8", "cpu": "4"},
        "limits": {"nvidia.com/gpu": "8"},
    }
    cluster.create_pod_template("dws-worker", spec)
    return cluster


def exits_on_sigterm(says: str) -> str:
    """Python source for a local-process container: prints ``ready``, sleeps; on SIGTERM prints
    ``says`` and exits 0 (a trainer saving its checkpoint within the grace period)."""
    return f"""
import signal, sys, time
def stop(*_):
    print({says!r}, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(600)
"""

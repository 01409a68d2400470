"""The simulated Kubernetes clusters the real-Airflow suite runs its gangs on.

Each is a :class:`gang_sim.testing.ClusterHarness`, serving HTTPS on 127.0.0.1 and read by the tests
with kubectl through its kubeconfig (the same file the Airflow connection points at), started one of
two ways by its :class:`ClusterSpec`:

- with a ``time_scale``: ``gang-sim serve --scenario S --time-scale N`` in a subprocess
  (``served=True``); simulated time runs N times the wall clock from the moment it starts;
- without one: the emulator and its control plane on a ``ManualClock`` in a thread of the test
  process; simulated time stands still until the test calls ``cluster.advance``, so "capacity arrives
  later" happens exactly when the test says, whatever the load. It also records every committed
  change (``cluster.changes(resource_suffix)``).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gang_sim.testing import ClusterHarness
from tests.standalone.processes import BIN


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster to start: a named scenario (or scenario file) and its speed; ``time_scale=None``
    runs it on a manual clock in the test process."""

    scenario: str
    time_scale: float | None


def start_cluster(directory: Path, name: str, spec: ClusterSpec) -> ClusterHarness:
    """Start ``spec``'s cluster; its kubeconfig is ``directory/kubeconfig-<name>`` (a served one logs to
    ``directory/gang-sim-<name>.log``)."""
    kubeconfig = directory / f"kubeconfig-{name}"
    if spec.time_scale is None:
        cluster = ClusterHarness(spec.scenario, record_changes=True, kubeconfig_path=kubeconfig)
    else:
        cluster = ClusterHarness(
            spec.scenario,
            time_scale=spec.time_scale,
            served=True,
            kubeconfig_path=kubeconfig,
            log_path=directory / f"gang-sim-{name}.log",
            start_timeout=120,
        )
    cluster.start()
    return cluster


def connection_json(cluster: ClusterHarness) -> str:
    """The Airflow connection (``AIRFLOW_CONN_...`` value) of ``cluster``."""
    return json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(cluster.kubeconfig_path)}})


def kubectl(cluster: ClusterHarness, *arguments: str) -> str:
    """kubectl's output for ``arguments`` against ``cluster`` (CalledProcessError when it fails)."""
    result = subprocess.run(
        [str(BIN / "kubectl"), "--kubeconfig", str(cluster.kubeconfig_path), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def names(cluster: ClusterHarness, kinds: str, label_selector: str) -> list[str]:
    """``kind/name`` of every object of ``kinds`` (comma separated) matching the selector."""
    return kubectl(cluster, "get", kinds, "-n", "default", "-l", label_selector, "-o", "name").split()

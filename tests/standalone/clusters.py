"""The simulated Kubernetes clusters the real-Airflow suite runs its gangs on.

Two kinds, both serving HTTPS on 127.0.0.1 and read by the tests with kubectl through their
kubeconfig (the same file the Airflow connection points at):

- :class:`ServedCluster`: ``gang-sim serve --scenario S --time-scale N`` in a subprocess; simulated
  time runs N times the wall clock from the moment it starts.
- :class:`ManualCluster`: the emulator and its control plane on a ``ManualClock`` in a thread of the
  test process (``ClusterHarness``); simulated time stands still until the test calls
  :meth:`ManualCluster.advance`, so "capacity arrives later" happens exactly when the test says,
  whatever the load. It also records every committed change (:meth:`ManualCluster.changes`).
"""

from __future__ import annotations

import json
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from gang_sim.world.scenario import load_scenario
from tests.standalone.processes import BIN, Started, diagnosed_by, start, tail


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster to start: a named scenario (or scenario file) and its speed; ``time_scale=None``
    runs it on a manual clock (:class:`ManualCluster`)."""

    scenario: str
    time_scale: float | None


@dataclass
class Cluster(ABC):
    """What both kinds share: the kubeconfig and kubectl."""

    name: str
    kubeconfig: Path

    def connection_json(self) -> str:
        """The Airflow connection (``AIRFLOW_CONN_...`` value) of this cluster."""
        return json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(self.kubeconfig)}})

    def kubectl(self, *arguments: str) -> str:
        result = subprocess.run(
            [str(BIN / "kubectl"), "--kubeconfig", str(self.kubeconfig), *arguments],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return result.stdout

    def names(self, kinds: str, label_selector: str) -> list[str]:
        """``kind/name`` of every object of ``kinds`` (comma separated) matching the selector."""
        return self.kubectl("get", kinds, "-n", "default", "-l", label_selector, "-o", "name").split()

    @abstractmethod
    def describe(self) -> str:
        """State and recent log for failure messages (also once stopped)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the cluster (idempotent)."""


@dataclass
class ServedCluster(Cluster):
    """``gang-sim serve`` in its own session."""

    started: Started

    def describe(self) -> str:
        return self.started.describe()

    def stop(self) -> None:
        self.started.stop()


@dataclass
class ManualCluster(Cluster):
    """An in-process emulator whose simulated time moves only in :meth:`advance`."""

    harness: ClusterHarness
    _changes: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def advance(self, seconds: float) -> float:
        """Move simulated time ``seconds`` forward, deadline by deadline; return the new time."""
        return self.harness.advance(seconds, timeout=120)

    def record(self, event: str, resource: str, obj: dict[str, Any]) -> None:
        """Store subscriber (runs on the emulator's loop): keep the change."""
        self._changes.append((event, resource, obj))

    def changes(self, resource_suffix: str) -> list[tuple[str, dict[str, Any]]]:
        """``(event type, object)`` of every committed change since the start to a resource whose key
        ends with ``resource_suffix`` (e.g. ``"/provisioningrequests"``, ``"v1/pods"``), in order."""
        recorded: list[tuple[str, str, dict[str, Any]]] = self.harness.run(lambda: list(self._changes))
        return [(event, obj) for event, resource, obj in recorded if resource.endswith(resource_suffix)]

    def describe(self) -> str:
        control = self.harness.control
        try:
            clock = self.harness.run(lambda: control.describe() if control else {})
        except RuntimeError:  # stopped
            clock = "stopped"
        lines = "\n".join(f"{event} {obj['kind']}/{obj['metadata']['name']}" for event, _, obj in list(self._changes))
        return f"--- cluster {self.name} (manual clock: {clock}), last changes:\n{tail(lines, 20)}"

    def stop(self) -> None:
        self.harness.stop()


def start_cluster(directory: Path, name: str, spec: ClusterSpec) -> Cluster:
    """Start ``spec``'s cluster; its kubeconfig is ``directory/kubeconfig-<name>``."""
    kubeconfig = directory / f"kubeconfig-{name}"
    if spec.time_scale is None:
        harness = ClusterHarness(scenario=load_scenario(spec.scenario), kubeconfig_path=kubeconfig)
        harness.start()
        cluster = ManualCluster(name, kubeconfig, harness)
        try:
            harness.run(lambda: harness.store.subscribe(cluster.record))
        except BaseException:
            harness.stop()
            raise
        return cluster
    started = start(
        f"gang-sim {name}",
        [
            str(BIN / "gang-sim"),
            "serve",
            "--scenario",
            spec.scenario,
            "--time-scale",
            str(spec.time_scale),
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        directory / f"gang-sim-{name}.log",
    )
    try:
        with diagnosed_by(started.describe):
            eventually(
                lambda: "ready:" in started.log() or not started.running(),
                timeout=120,
                what=f"gang-sim {name} ready",
                interval=0.2,
            )
        if not started.running():
            raise AssertionError(f"gang-sim exited:\n{started.describe()}")
    except BaseException:
        started.stop()
        raise
    return ServedCluster(name, kubeconfig, started)

"""Kueue's MultiKueue on real control planes: a manager and two workers, each a :class:`RealCluster`.

::

    with RealMultiKueue(kubeconfig_path="mk.kubeconfig") as setup:   # contexts manager, worker-1, worker-2
        setup.manager.kubectl("get", "multikueueclusters")

The three control planes start side by side (each its own etcd, kube-apiserver, controller-manager,
scheduler, kwok and Kueue; no cluster-autoscaler: the nodes are there from the start). Then the
MultiKueue objects of ``gang_sim.testing.multikueue`` are applied - on each worker its ClusterQueue
and the LocalQueue ``team`` in ``default``, on the manager the workers' kubeconfig Secrets (their
admins' client certificates, with ``certificate-authority-data``, as Kueue requires of a
MultiKueueCluster's kubeconfig), the MultiKueueClusters, the MultiKueueConfig, the AdmissionCheck and
the ClusterQueue using it - and the start waits until the manager's Kueue reports both
MultiKueueClusters ``Active``, and every ClusterQueue and LocalQueue of the three clusters too
(:meth:`RealMultiKueue.inactive`). ``worker-1`` has one CPU node and a ClusterQueue without GPUs (it never
admits a GPU gang); ``worker-2`` has four 1-GPU nodes and a ClusterQueue of 4 GPUs; the manager's
ClusterQueue holds 8. :attr:`RealMultiKueue.kubeconfig_path` holds one context per cluster, the
manager's current.
"""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from gang_sim.testing import multikueue as wiring
from gang_sim.testing.real.binaries import Binaries, find
from gang_sim.testing.real.cluster import START_TIMEOUT_SECONDS, RealCluster
from gang_sim.testing.started import Started
from gang_sim.world.scenario import Scenario, parse_scenario

SETUP = "multikueue"
"""What ``gang-sim real --scenario multikueue`` starts: :class:`RealMultiKueue`."""
MANAGER, WORKER_1, WORKER_2 = "manager", "worker-1", "worker-2"
QUEUE, NAMESPACE = "team", "default"
ACTIVE_TIMEOUT_SECONDS = 120.0
_CPU_POOL = {
    "name": "cpu",
    "zone": "zone-a",
    "cpu": "8",
    "memory": "32Gi",
    "minNodes": 1,
    "maxNodes": 1,
    "initialNodes": 1,
}
_GPU_POOL = {
    "name": "gpu",
    "zone": "zone-a",
    "gpuType": "nvidia-l4",
    "gpusPerNode": 1,
    "cpu": "8",
    "memory": "32Gi",
    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    "minNodes": 4,
    "maxNodes": 4,
    "initialNodes": 4,
}
SCENARIOS: dict[str, dict[str, Any]] = {
    MANAGER: {"name": MANAGER, "description": "a MultiKueue manager: no member runs here", "nodePools": [_CPU_POOL]},
    WORKER_1: {"name": WORKER_1, "description": "a worker without GPUs", "nodePools": [_CPU_POOL]},
    WORKER_2: {"name": WORKER_2, "description": "a worker with four 1-GPU nodes", "nodePools": [_CPU_POOL, _GPU_POOL]},
}
QUOTAS: dict[str, wiring.Quota] = {
    MANAGER: {"cpu": "128", "memory": "512Gi", "nvidia.com/gpu": "8"},
    WORKER_1: {"cpu": "64", "memory": "256Gi"},
    WORKER_2: {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4"},
}


def scenario(name: str) -> Scenario:
    """The scenario of cluster ``name`` (:data:`SCENARIOS`)."""
    return parse_scenario(copy.deepcopy(SCENARIOS[name]))


def combined_kubeconfig(kubeconfigs: dict[str, Path]) -> dict[str, Any]:
    """One kubeconfig holding each cluster's admin as context ``<name>``, the manager's current."""
    document: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for name, path in kubeconfigs.items():
        single = yaml.safe_load(path.read_text())
        document["clusters"].append({"name": name, "cluster": single["clusters"][0]["cluster"]})
        document["users"].append({"name": name, "user": single["users"][0]["user"]})
        document["contexts"].append({"name": name, "context": {"cluster": name, "user": name, "namespace": NAMESPACE}})
    document["current-context"] = MANAGER
    return document


class RealMultiKueue(Started):
    """A MultiKueue manager and its two workers on real control planes (module docstring)."""

    def __init__(
        self,
        *,
        binaries: Binaries | None = None,
        kubeconfig_path: str | Path | None = None,
        start_timeout: float = START_TIMEOUT_SECONDS,
    ) -> None:
        self.binaries = binaries or find()
        self._requested_kubeconfig = Path(kubeconfig_path) if kubeconfig_path is not None else None
        self.clusters = {
            name: RealCluster(scenario(name), binaries=self.binaries, autoscaler=False, start_timeout=start_timeout)
            for name in (MANAGER, WORKER_1, WORKER_2)
        }
        self.kubeconfig_path = Path()
        self.started_in_seconds: float | None = None

    @property
    def manager(self) -> RealCluster:
        return self.clusters[MANAGER]

    @property
    def url(self) -> str:
        return self.manager.url

    def start(self) -> None:
        """Start the three control planes at once, wire MultiKueue, wait until both workers are active;
        on any failure stop everything."""
        began = time.monotonic()
        try:
            self._start_all()
            for name in (WORKER_1, WORKER_2):
                self.clusters[name].apply(
                    [wiring.flavor(), *wiring.queue_objects(QUOTAS[name], queue=QUEUE, namespace=NAMESPACE)]
                )
            kubeconfigs = {name: self.clusters[name].kubeconfig_path.read_bytes() for name in (WORKER_1, WORKER_2)}
            checked = wiring.queue_objects(
                QUOTAS[MANAGER], queue=QUEUE, namespace=NAMESPACE, admission_check=wiring.CHECK
            )
            self.manager.apply([*wiring.manager_objects(kubeconfigs), wiring.flavor(), *checked])
            self._wait_until_active()
            self.kubeconfig_path = self._write_kubeconfig()
        except BaseException:
            self.stop()
            raise
        self.started_in_seconds = time.monotonic() - began

    def stop(self) -> None:
        for cluster in self.clusters.values():
            cluster.stop()

    def _start_all(self) -> None:
        failures: list[BaseException] = []

        def start(cluster: RealCluster) -> None:
            try:
                cluster.start()
            except BaseException as error:  # reported below, on the caller's thread
                failures.append(error)

        threads = [threading.Thread(target=start, args=(cluster,)) for cluster in self.clusters.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]

    def active(self) -> dict[str, str]:
        """Each MultiKueueCluster's ``Active`` status on the manager (``"Unknown"`` when not reported)."""
        found = self.manager.get("multikueueclusters.v1beta2.kueue.x-k8s.io")["items"]
        return {
            item["metadata"]["name"]: str((wiring.active_condition(item) or {}).get("status", "Unknown"))
            for item in found
        }

    def inactive(self) -> list[str]:
        """What a Job submitted now would still wait for: each worker's MultiKueueCluster on the manager,
        and each ClusterQueue and LocalQueue of the three clusters, whose ``Active`` condition is not
        ``True``. Kueue activates the manager's ClusterQueue only once its MultiKueue AdmissionCheck is
        active, after the clusters; until then its LocalQueue refuses workloads with
        ``ClusterQueueIsInactive``."""
        states = self.active()
        waiting = [
            f"{MANAGER} multikueuecluster/{name}: {states.get(name, 'not created')}"
            for name in (WORKER_1, WORKER_2)
            if states.get(name) != "True"
        ]
        for place, cluster in self.clusters.items():
            for kind in wiring.QUEUE_KINDS:
                items = cluster.get(f"{kind}.v1beta2.kueue.x-k8s.io", namespace=NAMESPACE)["items"]
                waiting += wiring.inactive_objects(place, kind, items)
        return waiting

    def _wait_until_active(self) -> None:
        deadline = time.monotonic() + ACTIVE_TIMEOUT_SECONDS
        while waiting := self.inactive():
            if time.monotonic() > deadline:
                raise RuntimeError(f"MultiKueue not active after {ACTIVE_TIMEOUT_SECONDS:.0f} s: {'; '.join(waiting)}")
            time.sleep(0.5)

    def _write_kubeconfig(self) -> Path:
        kubeconfigs = {name: cluster.kubeconfig_path for name, cluster in self.clusters.items()}
        document = yaml.safe_dump(combined_kubeconfig(kubeconfigs), sort_keys=False)
        path = self._requested_kubeconfig or self.manager.directory / "multikueue.kubeconfig"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(document)
        path.chmod(0o600)
        return path

"""One cluster interface over both backends, so a tier-``real`` test runs unchanged on either.

``RealBackend`` is the real control plane of ``make real-cluster``
(:class:`gang_sim.testing.real.RealCluster`: kube-apiserver 1.37, the real scheduler,
controller-manager, Kueue and cluster-autoscaler on kwok nodes); ``SimBackend`` is ``gang-sim`` on
the same scenario. Both expose what the tests read: objects by store key (``"v1/pods"``,
``"autoscaling.x-k8s.io/v1/provisioningrequests"``), one create, the Airflow connection id, and a
wait on a condition with a deadline in real seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from demo.cluster import simulated_cluster
from gang_sim.testing.eventually import eventually
from gang_sim.testing.real import RealCluster
from gang_sim.world.scenario import Scenario, load_scenario

SCENARIO = Path(__file__).with_name("scenarios") / "gpu.yaml"
CONN_ID = "kubernetes_default"
T = TypeVar("T")


def kubectl_resource(store_key: str) -> str:
    """``"v1/pods"`` -> ``pods``; ``"kueue.x-k8s.io/v1beta2/workloads"`` -> ``workloads.v1beta2.kueue.x-k8s.io``."""
    parts = store_key.split("/")
    if len(parts) == 2:
        return parts[1]
    group, version, plural = parts
    return f"{plural}.{version}.{group}"


class Backend(Protocol):
    name: str
    conn_id: str
    scenario: Scenario

    def objects(self, resource: str, namespace: str = "default", label_selector: str = "") -> list[dict[str, Any]]: ...

    def create(self, resource: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]: ...


class RealBackend:
    name = "real"

    def __init__(self, cluster: RealCluster, conn_id: str = CONN_ID) -> None:
        self.cluster = cluster
        self.conn_id = conn_id
        self.scenario = cluster.scenario

    def objects(self, resource: str, namespace: str = "default", label_selector: str = "") -> list[dict[str, Any]]:
        arguments = ["get", kubectl_resource(resource), "-o", "json", "-n", namespace]
        if label_selector:
            arguments += ["-l", label_selector]
        items: list[dict[str, Any]] = json.loads(self.cluster.kubectl(*arguments))["items"]
        return items

    def create(self, resource: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        arguments = ["create", "-o", "json", "-f", "-"] + (["-n", namespace] if namespace else [])
        created: dict[str, Any] = json.loads(self.cluster.kubectl(*arguments, input_text=yaml.safe_dump(body)))
        return created


def wait_for(condition: Callable[[], T | None], *, timeout: float, what: str) -> T:
    """``condition()`` once truthy, polled every half second for ``timeout`` real seconds."""
    return eventually(condition, timeout=timeout, what=what, interval=0.5)


@contextmanager
def airflow_connection(kubeconfig: Path, conn_id: str = CONN_ID) -> Iterator[None]:
    """``AIRFLOW_CONN_<ID>`` pointing at ``kubeconfig`` (Airflow reads connections from the environment first)."""
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    previous = os.environ.get(variable)
    os.environ[variable] = json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}})
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = previous


@contextmanager
def started_together(*clusters: RealCluster) -> Iterator[tuple[RealCluster, ...]]:
    """``clusters`` started each in its own thread at once; all stopped on exit, whatever failed."""
    try:
        with ThreadPoolExecutor(len(clusters)) as pool:
            starts = [pool.submit(cluster.start) for cluster in clusters]
        for start in starts:
            start.result()
        yield clusters
    finally:
        for cluster in clusters:
            cluster.stop()


@contextmanager
def real_backend(scenario: Path | str = SCENARIO) -> Iterator[RealBackend]:
    with RealCluster(load_scenario(str(scenario))) as cluster, airflow_connection(cluster.kubeconfig_path):
        yield RealBackend(cluster)


@contextmanager
def sim_backend(scenario: Path | str | Scenario = SCENARIO) -> Iterator[Any]:
    """gang-sim on the scenario (a file, a name or a loaded one) at real time, as the real backend runs
    (delays are real seconds)."""
    loaded = scenario if isinstance(scenario, Scenario) else load_scenario(str(scenario))
    with simulated_cluster(loaded, time_scale=1.0) as cluster:
        cluster.name = "sim"
        yield cluster


@contextmanager
def own_backend(name: str, scenario: Path) -> Iterator[Any]:
    """A cluster of its own for ``scenario`` on backend ``name`` (``"gang-sim"`` or ``"real"``: the
    real control plane without Kueue), with the Airflow connection pointing at it - what the modules
    parametrized over both backends start once each."""
    if name == "real":
        with (
            RealCluster(load_scenario(str(scenario)), kueue=False) as cluster,
            airflow_connection(cluster.kubeconfig_path),
        ):
            yield RealBackend(cluster)
    else:
        with sim_backend(scenario) as cluster:
            yield cluster

"""pytest fixtures for the emulator: load with ``pytest_plugins = ["gang_sim.testing.pytest_plugin"]``
in a top-level conftest (https://docs.pytest.org/en/stable/how-to/plugins.html#requiring-plugins).

- ``emulator``: a :class:`~.harness.ClusterHarness` (the API server alone, seed 0), started for the
  test and stopped after it.
- ``sim_cluster``: a function ``start(scenario)`` (a :class:`~gang_sim.world.scenario.Scenario`,
  the name of a shipped one or a scenario document) returning a :class:`SimCluster`: the API server with the simulated
  control plane on a ManualClock (time moves only with ``advance``), read through the official
  ``kubernetes`` client. Every cluster started is stopped after the test, and the test fails if a
  controller mutated an object after the store committed it (:class:`StoredObjectsUnchanged`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from gang_sim.apiserver.object_copy import json_copy
from gang_sim.testing.harness import ClusterHarness, ScenarioSource

PROVISIONING = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")
"""Group, version and plural of ProvisioningRequests."""
KUEUE = ("kueue.x-k8s.io", "v1beta2")
"""Group and version of the Kueue objects."""


@dataclass
class SimCluster:
    """A started simulated cluster and ``kubernetes`` clients for it, with shortcuts tests share."""

    harness: ClusterHarness
    api: client.ApiClient
    core: client.CoreV1Api = field(init=False)
    batch: client.BatchV1Api = field(init=False)
    custom: client.CustomObjectsApi = field(init=False)

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def advance(self, seconds: float) -> float:
        """Move the ManualClock ``seconds`` forward, controllers acting at every deadline; the new time."""
        return self.harness.advance(seconds)

    def pods(self, namespace: str = "default", selector: str = "") -> list[Any]:
        return list(self.core.list_namespaced_pod(namespace, label_selector=selector).items)

    def log(self, pod: str, namespace: str = "default") -> str:
        """The pod's log so far; "" while its container is being created (the API answers 400)."""
        try:
            response = self.core.read_namespaced_pod_log(pod, namespace, _preload_content=False)
        except ApiException as error:
            assert error.status == 400, error
            return ""
        return str(response.data.decode())

    def events(self, reason: str, namespace: str = "default") -> list[Any]:
        return [event for event in self.core.list_namespaced_event(namespace).items if event.reason == reason]

    def create_pod_template(self, name: str, spec: dict[str, Any], namespace: str = "default") -> None:
        self.core.create_namespaced_pod_template(
            namespace,
            {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name}, "template": {"spec": spec}},
        )

    def create_request(
        self,
        name: str,
        template: str,
        count: int,
        class_name: str,
        *,
        parameters: dict[str, str] | None = None,
        version: str = "v1",
        namespace: str = "default",
    ) -> None:
        """Create the ProvisioningRequest ``name`` for ``count`` pods of the PodTemplate ``template``."""
        spec: dict[str, Any] = {
            "provisioningClassName": class_name,
            "podSets": [{"podTemplateRef": {"name": template}, "count": count}],
        }
        if parameters:
            spec["parameters"] = parameters
        self.custom.create_namespaced_custom_object(
            "autoscaling.x-k8s.io",
            version,
            namespace,
            "provisioningrequests",
            {
                "apiVersion": f"autoscaling.x-k8s.io/{version}",
                "kind": "ProvisioningRequest",
                "metadata": {"name": name},
                "spec": spec,
            },
        )

    def request(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The ProvisioningRequest ``name``."""
        found: dict[str, Any] = self.custom.get_namespaced_custom_object(
            *PROVISIONING[:2], namespace, PROVISIONING[2], name
        )
        return found

    def conditions(self, obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
        """``obj``'s conditions as ``{type: (status, reason)}``."""
        return {
            item["type"]: (item["status"], item["reason"]) for item in (obj.get("status") or {}).get("conditions") or []
        }

    def kueue(self, plural: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The Kueue object ``name`` (cluster-scoped when ``namespace`` is None)."""
        if namespace is None:
            found: dict[str, Any] = self.custom.get_cluster_custom_object(*KUEUE, plural, name)
        else:
            found = self.custom.get_namespaced_custom_object(*KUEUE, namespace, plural, name)
        return found

    def create_kueue(
        self, plural: str, kind: str, name: str, spec: dict[str, Any], namespace: str | None = None
    ) -> None:
        body = {"apiVersion": "/".join(KUEUE), "kind": kind, "metadata": {"name": name}, "spec": spec}
        if namespace is None:
            self.custom.create_cluster_custom_object(*KUEUE, plural, body)
        else:
            self.custom.create_namespaced_custom_object(*KUEUE, namespace, plural, body)

    def workloads(self, namespace: str = "default") -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads")["items"]
        return items


class StoredObjectsUnchanged:
    """Every object the store commits, next to a copy taken at its commit.

    The simulated controllers read the stored objects themselves (``ObjectTable.view``, shared
    subscriptions), so one that mutated what it read would change the store behind its back;
    :meth:`changed` names every object that no longer equals its copy.
    """

    def __init__(self) -> None:
        self.committed: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def record(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        self.committed.append((obj, json_copy(obj)))

    def changed(self) -> list[str]:
        return [
            f"{obj.get('kind')} {obj['metadata'].get('name')} rv {committed['metadata'].get('resourceVersion')}"
            for obj, committed in self.committed
            if obj != committed
        ]


@pytest.fixture
def emulator() -> Iterator[ClusterHarness]:
    """A started emulator (thread + own loop): ``.url``, ``.kubeconfig_path``, ``.token``, ``.store``,
    ``.run(fn)`` to touch the store on the server loop, ``.emulator`` for hooks/faults/metrics."""
    with ClusterHarness(seed=0) as harness:
        yield harness


@pytest.fixture
def sim_cluster() -> Iterator[Callable[[ScenarioSource], SimCluster]]:
    """Start emulators with the control plane; on teardown, also assert no stored object was mutated."""
    started: list[tuple[ClusterHarness, client.ApiClient, StoredObjectsUnchanged]] = []

    def start(scenario: ScenarioSource) -> SimCluster:
        harness = ClusterHarness(scenario, seed=0)
        harness.start()
        recorder = StoredObjectsUnchanged()
        harness.run(lambda: harness.store.subscribe(recorder.record, shared=True))
        api = config.new_client_from_config(str(harness.kubeconfig_path))
        started.append((harness, api, recorder))
        return SimCluster(harness, api)

    yield start
    mutated: list[str] = []
    for harness, api, recorder in started:
        api.close()
        mutated += harness.run(recorder.changed)
        harness.stop()
    assert not mutated, f"stored objects changed after their commit: {mutated}"

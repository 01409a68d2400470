"""What the emulator saw of a topology gang: every member bound and where (its node's labels), and the
world ConfigMaps written - read from the Store's own changes, so a test sees them after the gang is
torn down, whatever the provider recorded."""

from __future__ import annotations

import threading
from typing import Any

from airflow_provider_gang.reservation import naming
from gang_sim.testing import ClusterHarness


class Bindings:
    """Every member pod bound (pod name -> node) and every world ConfigMap's data, as committed."""

    def __init__(self, cluster: ClusterHarness) -> None:
        self.cluster = cluster
        self.nodes: dict[str, str] = {}
        self.worlds: dict[str, dict[str, str]] = {}
        self.node_labels: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        store = cluster.store
        cluster.run(lambda: store.subscribe(self._record))

    def _record(self, event: str, resource: str, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        with self._lock:
            if resource == "v1/nodes" and event != "DELETED":
                self.node_labels[metadata["name"]] = dict(metadata.get("labels") or {})
            elif resource == "v1/pods" and (obj.get("spec") or {}).get("nodeName"):
                if naming.GANG_LABEL in (metadata.get("labels") or {}):
                    self.nodes.setdefault(metadata["name"], obj["spec"]["nodeName"])
            elif resource == "v1/configmaps" and metadata["name"].endswith("-world") and obj.get("data"):
                self.worlds[metadata["name"]] = dict(obj["data"])

    def of(self, gang: str) -> dict[str, str]:
        """Pod name -> node of every member of ``gang`` ever bound."""
        with self._lock:
            return {pod: node for pod, node in self.nodes.items() if pod.startswith(f"{gang}-")}

    def label_of(self, node: str, label: str) -> str | None:
        with self._lock:
            labels = self.node_labels.get(node)
        if labels is None:
            (found,) = [item for item in self.cluster.objects("v1/nodes") if item["metadata"]["name"] == node]
            labels = found["metadata"]["labels"]
        return labels.get(label)

    def domains(self, gang: str, label: str) -> set[str | None]:
        """The values of ``label`` on the nodes ``gang``'s members were bound to."""
        return {self.label_of(node, label) for node in self.of(gang).values()}

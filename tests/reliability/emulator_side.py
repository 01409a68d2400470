"""The reliability scenarios' access to the emulator from outside the provider.

- :class:`Control`: the emulator's ``/_sim/faults`` (the grammar is in the docstring of the
  emulator's ``apiserver/http/faults.py``) and its request log ``/_sim/requests``, over its HTTPS;
  :func:`call_target` names a logged request as a fault item does;
- :class:`Ledger`: every object of a gang the store committed, as it happened, which tells the
  verdict (``tests.reliability.harness.check``) about duplicates and orphans;
- :class:`BackgroundWrites`: another client's writes, which compact a small watch history.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from airflow_provider_gang.reservation import naming
from gang_sim.testing import ClusterHarness


class Control:
    """``/_sim/faults`` and ``/_sim/requests`` of a running emulator, over its HTTPS."""

    def __init__(self, cluster: ClusterHarness) -> None:
        config = yaml.safe_load(cluster.kubeconfig_path.read_text())
        cluster_entry = config["clusters"][0]["cluster"]
        self._url = cluster_entry["server"].rstrip("/")
        self._tls = ssl.create_default_context(
            cadata=base64.b64decode(cluster_entry["certificate-authority-data"]).decode()
        )

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self._url}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, context=self._tls, timeout=10) as answer:
            return json.loads(answer.read() or b"null")

    def set_faults(self, spec: str) -> None:
        self._call("PUT", "/_sim/faults", {"spec": spec})

    def clear_faults(self) -> None:
        self._call("DELETE", "/_sim/faults")

    def requests(self, *, clear: bool = False) -> list[dict[str, Any]]:
        return list(self._call("DELETE" if clear else "GET", "/_sim/requests"))


def call_target(entry: dict[str, Any]) -> str:
    """The fault-item target of a logged request: ``verb/resource[/subresource]``."""
    sub = entry.get("subresource")
    return f"{entry['verb']}/{entry['resource']}" + (f"/{sub}" if sub else "")


@dataclass
class Ledger:
    """Every object with a gang label the store committed, as it happened (``Store.subscribe``)."""

    live: dict[tuple[str, str, str], str] = field(default_factory=dict)
    """``(resource, namespace, name) -> gang`` of the objects stored now."""
    roles: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict)
    duplicates: list[str] = field(default_factory=list)
    created_at: dict[str, float] = field(default_factory=dict)
    """First moment (wall clock) an object of each gang was stored."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, cluster: ClusterHarness) -> Callable[[], None]:
        """Follow ``cluster``'s store from now on; returns the unsubscribe function."""
        unsubscribe: Callable[[], None] = cluster.run(lambda: cluster.store.subscribe(self._changed))
        return unsubscribe

    def _changed(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        gang = (metadata.get("labels") or {}).get(naming.GANG_LABEL)
        if not gang:
            return
        key = (resource, str(metadata.get("namespace") or ""), str(metadata["name"]))
        labels = metadata.get("labels") or {}
        rank = labels.get(naming.RANK_LABEL)
        role = (resource, f"{labels.get(naming.ROLE_LABEL, '')}:{rank if rank is not None else metadata['name']}")
        with self._lock:
            if event_type == "DELETED":
                self.live.pop(key, None)
                self.roles.pop(key, None)
                return
            if event_type == "ADDED":
                self.created_at.setdefault(gang, time.time())
                clash = [
                    other
                    for other, value in self.roles.items()
                    if value == role and other != key and self.live.get(other) == gang
                ]
                if clash:
                    self.duplicates.append(f"{key} while {clash[0]} of the same role of gang {gang} is live")
            self.live[key] = gang
            self.roles[key] = role

    def objects_of(self, gangs: set[str]) -> list[tuple[str, str, str]]:
        with self._lock:
            return [key for key, gang in self.live.items() if gang in gangs]


class BackgroundWrites:
    """Another client writing one ConfigMap every ``interval`` seconds while the block runs, so an
    emulator with a small ``history_limit`` compacts its watch history past the resourceVersion of a
    quiet watch, as a busy real API server's watch cache does: resuming from it is answered 410.

    ``with BackgroundWrites(cluster, 0.2) as writes: ...``; ``writes.count`` is the writes made.
    """

    def __init__(self, cluster: ClusterHarness, interval: float, name: str = "background-writes") -> None:
        self._cluster, self._interval, self._name = cluster, interval, name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, name=name, daemon=True)
        self.count = 0

    def __enter__(self) -> BackgroundWrites:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": self._name}, "data": {"n": "0"}}
        self._cluster.create("v1/configmaps", body, "default")
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _write(self) -> None:
        store = self._cluster.store
        while not self._stop.wait(self._interval):
            self.count += 1
            patch = {"data": {"n": str(self.count)}}
            self._cluster.run(lambda patch=patch: store.patch("v1/configmaps", self._name, patch, namespace="default"))

"""An API server killed (SIGKILL) and started again, as a client sees it: on the real control plane the
kube-apiserver over the etcd that keeps its objects, on the emulator :meth:`Emulator.restart` over its
store. Objects, uids and resourceVersions are kept, a watch open at the kill ends, connections are
refused while it is down, and the watch cache starts again at the restart: a watch from a version
before it is 410 Expired (the cacher's "too old resource version", ``staging/src/k8s.io/apiserver/
pkg/storage/cacher/watch_cache.go``), and a client lists again and watches from the list's version,
as client-go's reflector does after a 410.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes import client, watch

from .conftest import Cluster

DOWN_SECONDS = 3.0


def watch_until_it_ends(core: client.CoreV1Api, namespace: str, resource_version: str) -> dict[str, Any]:
    """Watch ConfigMaps from ``resource_version`` in a thread; the returned dict gets ``"ended"`` (the
    monotonic time the stream stopped) and ``"events"``."""
    seen: dict[str, Any] = {"events": []}

    def run() -> None:
        watcher = watch.Watch()
        try:
            for event in watcher.stream(
                core.list_namespaced_config_map,
                namespace,
                resource_version=resource_version,
                timeout_seconds=120,
                _request_timeout=150,
            ):
                seen["events"].append((event["type"], event["object"].metadata.name))
        except Exception as error:  # the connection is cut: the kind of error is the client's business
            seen["error"] = repr(error)
        seen["ended"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    seen["thread"] = thread
    return seen


def test_a_restarted_apiserver_keeps_objects_and_versions_and_starts_its_watch_cache_again(
    cluster: Cluster, namespace: str
) -> None:
    core = client.CoreV1Api(cluster.api)
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": "kept"}, "data": {"step": "1"}})
    older = created.metadata.resource_version
    newest = core.patch_namespaced_config_map("kept", namespace, {"data": {"step": "2"}}).metadata.resource_version
    open_watch = watch_until_it_ends(core, namespace, newest)
    time.sleep(1.0)  # the watch is established before the kill (real time: two processes race)
    killed = time.monotonic()

    refused: list[str] = []

    def probe_while_down() -> None:
        time.sleep(DOWN_SECONDS / 3)
        status = cluster.probe()
        if status is not None:
            refused.append(status)

    prober = threading.Thread(target=probe_while_down, daemon=True)
    prober.start()
    cluster.restart_apiserver(DOWN_SECONDS)
    prober.join(30)
    open_watch["thread"].join(30)

    assert "ended" in open_watch, "the watch open at the kill did not end"
    assert open_watch["ended"] - killed < DOWN_SECONDS + 10
    assert open_watch["events"] == [], "nothing changed, yet the watch delivered events"
    assert refused and "refused" in refused[0].lower(), f"no connection refused while it was down: {refused}"

    kept = core.read_namespaced_config_map("kept", namespace)
    assert (kept.metadata.uid, kept.metadata.resource_version, kept.data) == (
        created.metadata.uid,
        newest,
        {"step": "2"},
    )
    status, body = cluster.raw(
        "GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=1&resourceVersion={older}&timeoutSeconds=1"
    )
    assert status == 200
    assert body["type"] == "ERROR" and body["object"]["code"] == 410, body
    relisted = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.patch_namespaced_config_map("kept", namespace, {"data": {"step": "3"}})
    events = [
        (event["type"], event["object"].data)
        for event in watch.Watch().stream(
            core.list_namespaced_config_map, namespace, resource_version=relisted, timeout_seconds=3
        )
    ]
    assert events == [("MODIFIED", {"step": "3"})]


@pytest.fixture(autouse=True)
def _restartable(cluster: Cluster) -> None:
    if not cluster.can_restart_apiserver:
        pytest.skip("restarting the API server needs the emulator or the real control plane this suite starts")

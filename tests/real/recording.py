"""What a cluster did to one gang, recorded from watches: every version of its objects, in order.

A :class:`Recorder` watches one kind in ``default`` (through the official ``kubernetes`` client,
``watch.Watch().stream``, resuming from the last resourceVersion) in a daemon thread and keeps every
version it sees. The tests read what members *would* read (kwok runs no containers: a Job's
``parallelism``, the world ConfigMap's ``size``), and the differential test reduces the versions to
sequences of conditions, phases and gate removals (:mod:`tests.real.sequences`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes import client, config, watch

from tests.real.backends import kubectl_resource

_WATCH_SECONDS = 5


class Recorder:
    """Every version of the objects of ``resource`` in ``namespace`` seen by a watch, oldest first."""

    def __init__(self, kubeconfig: str, resource: str, namespace: str = "default") -> None:
        self.resource = resource
        self.namespace = namespace
        self.versions: list[tuple[str, dict[str, Any]]] = []
        self._api = config.new_client_from_config(kubeconfig)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"record-{kubectl_resource(resource)}", daemon=True)

    def _list_call(self) -> Any:
        parts = self.resource.split("/")
        if len(parts) == 2 or parts[0] == "batch":
            group_version, plural = "/".join(parts[:-1]), parts[-1]
            if group_version == "v1":
                core = client.CoreV1Api(self._api)
                return getattr(core, f"list_namespaced_{_singular(plural)}")
            batch = client.BatchV1Api(self._api)
            return batch.list_namespaced_job
        group, version, plural = parts
        custom = client.CustomObjectsApi(self._api)

        def list_custom(namespace: str, **options: Any) -> Any:
            return custom.list_namespaced_custom_object(group, version, namespace, plural, **options)

        return list_custom

    def _run(self) -> None:
        call = self._list_call()
        resource_version = None
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                options: dict[str, Any] = {"timeout_seconds": _WATCH_SECONDS, "_request_timeout": _WATCH_SECONDS + 5}
                if resource_version:
                    options["resource_version"] = resource_version
                self._ready.set()
                for event in stream.stream(call, self.namespace, **options):
                    obj = event["raw_object"]
                    resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
                    self.versions.append((event["type"], obj))
                    if self._stop.is_set():
                        break
            except client.ApiException as error:
                if error.status == 410:
                    resource_version = None
                    continue
                raise
            finally:
                stream.stop()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(_WATCH_SECONDS + 10)
        self._api.close()

    def named(self, prefix: str) -> list[dict[str, Any]]:
        """Versions of objects whose name starts with ``prefix``, oldest first."""
        return [obj for _, obj in self.versions if obj["metadata"]["name"].startswith(prefix)]


def _singular(plural: str) -> str:
    return {"pods": "pod", "configmaps": "config_map", "services": "service", "podtemplates": "pod_template"}[plural]


@contextmanager
def recording(kubeconfig: str, *resources: str) -> Iterator[dict[str, Recorder]]:
    """Record ``resources`` for the duration of the block; recorders by resource."""
    recorders = {resource: Recorder(kubeconfig, resource) for resource in resources}
    for recorder in recorders.values():
        recorder.start()
    try:
        yield recorders
    finally:
        for recorder in recorders.values():
            recorder.stop()

"""The try history of a task instance, the task's side: where it is kept and how a try reads and
writes it. (The pages read it through ``plugin.try_history``; its keys and formats are
``reservation.records.task_state``, the ConfigMap's name and role label ``reservation.naming``.)

The history (the finished tries and the try in progress) must survive retries, clears and worker
crashes - adoption and the fallback ladder read it - so neither XComs (cleared when a try starts) nor
``defer()`` kwargs (dropped by ``dag.test()``: ``next_kwargs = {"event": ...}`` in ``DAG.test``,
apache/airflow ``task-sdk/src/airflow/sdk/definitions/dag.py``) can hold it. :class:`TryHistory` reads
and writes its two keys through a :class:`TryStore`; only ``operators.lifecycle`` uses it. Two stores:

- **Airflow 3.3 and later**: the task runner puts a ``TaskStateStoreAccessor`` in the context
  (``context["task_state_store"]``, ``airflow/sdk/execution_time/context.py``), scoped to the task
  instance and not to a try; it is a :class:`TryStore` as it is.
- **Airflow 3.1 and 3.2** (no task state store): :class:`ClusterTryStore`, one ConfigMap per task
  instance in the operator's namespace, beside the gang objects it describes. Chosen over an Airflow
  Variable namespace (global, editable in the UI, shadowed by secrets backends, and usable only
  under a task runner's supervisor) and over an XCom of a dedicated key (Airflow 3 deletes every
  XCom of a task instance when a try starts, whatever its key). The cluster is the one service every
  try already talks to before it creates anything, its RBAC already grants ConfigMaps (``deploy/rbac.yaml``),
  and each write is one merge patch of one key, atomic on the API server. The history ConfigMap carries
  no gang label, so no teardown or withdrawal (which select by ``airflow-gang.io/gang``) deletes it.

:func:`store_for` selects by feature detection: the context's ``task_state_store`` when the task
runner provided one, else the cluster store - never by parsing Airflow's version. Built from a bare
context, :class:`TryHistory` refuses a context without a task state store with ``RuntimeError``
rather than keep the history in a process that a retry does not share.

One difference, written here so no one assumes otherwise: a try that ends because the cluster cannot
be reached cannot write its record to a store on that cluster either. Its state stays "in progress",
and the next try examines it as a lost worker's: it adopts the gang only if its owner ConfigMap is
intact and still marked as owned by that try (``hooks.inspection.adoption_refusal``), else records
it as killed - the same rule as after a worker crash.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, TypeVar

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CONFIG_MAPS
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState

T = TypeVar("T")
OnCluster = Callable[[Callable[[KubeClient], Awaitable[Any]]], Any]
"""Runs one async piece of work with a connected client and returns its result (``TryRun.cluster``)."""

EXPIRES_ANNOTATION = f"{naming.LABEL_PREFIX}/expires-at"
"""When a history ConfigMap may be deleted: :data:`RETENTION` after its last write (ISO 8601, UTC)."""
RETENTION = timedelta(days=30)
"""How long a history is kept after its last write: Airflow 3.3's ``[state_store]
default_retention_days`` default (``airflow/config_templates/config.yml``)."""


class TryStore(Protocol):
    """Keys of one task instance, JSON values; ``get`` answers ``default`` for a key never set."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...

    def delete(self, key: str) -> None: ...


class TryHistory:
    """Read and write the two keys for the task instance of ``context``."""

    def __init__(self, context: Mapping[str, Any], store: TryStore | None = None) -> None:
        store = store if store is not None else context.get("task_state_store")
        if store is None:
            raise RuntimeError(
                "the context has no task_state_store: the gang operator keeps its tries in Airflow's "
                "task state store (Airflow 3.3 or later)"
            )
        self._store = store

    def _get(self, key: str) -> Any:
        return self._store.get(key, default=None)

    def _set(self, key: str, value: Any) -> None:
        self._store.set(key, value)

    def _delete(self, key: str) -> None:
        self._store.delete(key)

    def finished(self) -> list[TryRecord]:
        """Records of every finished try, oldest first."""
        return task_state.read_tries(self._get(task_state.TRIES_KEY))

    def record(self, record: TryRecord, *, drop_current: bool) -> None:
        """Append ``record`` unless this try already has one (a resumed worker may finish twice), then
        remove the record of the try in progress if ``drop_current`` (it is ``record``'s try)."""
        existing = list(self._get(task_state.TRIES_KEY) or [])
        if not any(item.get("attempt") == record.attempt for item in existing):
            self._set(task_state.TRIES_KEY, [*existing, record.to_dict()])
        if drop_current:
            self._delete(task_state.CURRENT_KEY)

    def current(self) -> TryState | None:
        """The try in progress, or ``None``."""
        return task_state.read_current(self._get(task_state.CURRENT_KEY))

    def store_current(self, state: TryState) -> None:
        """Replace the record of the try in progress."""
        self._set(task_state.CURRENT_KEY, state.to_dict())


def store_for(context: Mapping[str, Any], on_cluster: OnCluster, namespace: str) -> TryStore:
    """The task state store of ``context`` if the task runner gave one (Airflow 3.3 and later), else
    the :class:`ClusterTryStore` of its task instance in ``namespace``."""
    store = context.get("task_state_store")
    if store is not None:
        return store  # type: ignore[no-any-return]
    ti = context["ti"]
    map_index = getattr(ti, "map_index", None)
    return ClusterTryStore(
        on_cluster,
        namespace,
        dag_id=str(ti.dag_id),
        run_id=str(ti.run_id),
        task_id=str(ti.task_id),
        map_index=-1 if map_index is None else int(map_index),
    )


class ClusterTryStore:
    """The try history of one task instance in a ConfigMap (module docstring).

    Each key is one entry of the ConfigMap's ``data``, its value JSON. ``set`` and ``delete`` are one
    merge patch each (the ConfigMap is created by the first ``set``); ``get`` reads the ConfigMap.
    Every write moves the :data:`EXPIRES_ANNOTATION` :data:`RETENTION` ahead, and the first write of
    a store deletes the expired histories of its namespace. A failing call raises the client's
    ``kube.errors.KubeError`` after the client's retries, as any other cluster action of the try.
    """

    def __init__(
        self, on_cluster: OnCluster, namespace: str, *, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> None:
        self._on_cluster = on_cluster
        self.namespace = namespace
        self.name = naming.try_history_name(dag_id, run_id, task_id, map_index)
        labels = {
            key: value
            for key, value in naming.run_labels(dag_id, task_id, run_id, map_index=map_index).items()
            if key != f"{naming.LABEL_PREFIX}/try-number"
        }
        self._labels = {**labels, naming.ROLE_LABEL: naming.TRY_HISTORY_ROLE}
        self._swept = False

    def get(self, key: str, default: Any = None) -> Any:
        async def read(client: KubeClient) -> Any:
            try:
                found = await client.get(CONFIG_MAPS, self.name, self.namespace)
            except errors.NotFound:
                return None
            return (found.get("data") or {}).get(key)

        stored = self._on_cluster(read)
        return default if stored is None else json.loads(stored)

    def set(self, key: str, value: Any) -> None:
        if value is None:
            raise ValueError("Cannot set value as None")  # as Airflow's TaskStateStoreAccessor.set
        self._write({key: json.dumps(value)})

    def delete(self, key: str) -> None:
        self._write({key: None})

    def _write(self, data: dict[str, str | None]) -> None:
        expires = (datetime.now(timezone.utc) + RETENTION).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {"metadata": {"annotations": {EXPIRES_ANNOTATION: expires}}, "data": data}
        sweep = not self._swept

        async def write(client: KubeClient) -> None:
            if sweep:
                await self._sweep_expired(client)
            for _ in range(2):  # a concurrent first write may create it between our patch and create
                try:
                    await client.patch(CONFIG_MAPS, self.name, patch, namespace=self.namespace)
                    return
                except errors.NotFound:
                    if all(text is None for text in data.values()):
                        return  # deleting from a history never written
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": self.name,
                        "labels": self._labels,
                        "annotations": {EXPIRES_ANNOTATION: expires},
                    },
                    "data": {name: text for name, text in data.items() if text is not None},
                }
                try:
                    await client.create(CONFIG_MAPS, body, self.namespace)
                    return
                except errors.AlreadyExists:
                    continue
            raise errors.Conflict(409, "Conflict", f"history ConfigMap {self.name} kept changing between writes")

        self._on_cluster(write)
        self._swept = True

    async def _sweep_expired(self, client: KubeClient) -> None:
        """Delete this namespace's history ConfigMaps whose expiry passed (not this one's); best
        effort: a refused or failed sweep is left to the next store's first write."""
        now = datetime.now(timezone.utc)
        selector = f"{naming.ROLE_LABEL}={naming.TRY_HISTORY_ROLE}"
        try:
            found, _ = await client.list(CONFIG_MAPS, self.namespace, label_selector=selector)
            for item in found:
                metadata = item.get("metadata") or {}
                expires = _parse_time((metadata.get("annotations") or {}).get(EXPIRES_ANNOTATION))
                if metadata.get("name") == self.name or expires is None or expires >= now:
                    continue
                with contextlib.suppress(errors.Conflict):  # written again since it was listed: kept
                    await client.delete(
                        CONFIG_MAPS,
                        str(metadata["name"]),
                        self.namespace,
                        preconditions={"resourceVersion": str(metadata.get("resourceVersion", ""))},
                    )
        except errors.KubeError:
            return


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None

"""The task state store of one task instance, as the try lifecycle reads and writes it.

XComs of a task instance are cleared when a new try starts, and ``dag.test()`` drops ``defer()``
kwargs (``next_kwargs = {"event": ...}`` in ``DAG.test``, apache/airflow
``task-sdk/src/airflow/sdk/definitions/dag.py``), so neither can carry the fallback history. Airflow 3.3's
``task_state_store`` (``context["task_state_store"]``) survives retries and worker crashes; the keys
and formats are ``reservation.records.task_state``. Only ``operators.lifecycle`` uses this class.

The store is the only place the history lives (``operators.try_store``: Airflow's task state
store, or the cluster on Airflow releases without one); built from a bare context, a context without
a task state store is refused with ``RuntimeError`` rather than kept in a process that a retry does
not share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.operators.try_store import TryStore
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState


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

"""An in-memory stand-in for Airflow's task state store, for operators driven by hand.

``context["task_state_store"]`` is a ``TaskStateStoreAccessor`` in Airflow 3.3
(``airflow/sdk/execution_time/context.py``): scoped to one task instance (dag, run, task, map
index) and not to a try, so every try of that task instance reads what earlier tries wrote. A
``FakeTaskInstance`` context has no task runner behind it; :func:`store_for` hands every context of
the same task instance the same :class:`FakeTaskStateStore`, as the real store's scope does.
``dag.test()`` runs need none of this: its task runner gives them the real store.
"""

from __future__ import annotations

import json
from typing import Any

Scope = tuple[str, str, str, int]


class FakeTaskStateStore:
    """``get``/``set``/``delete``/``clear`` of ``TaskStateStoreAccessor``, kept in a dict.

    Values pass through JSON on the way in and out, as the real store keeps them (a value that is
    not JSON fails here as it would there), and ``set(key, None)`` raises ``ValueError`` as the real
    accessor does.
    """

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    def get(self, key: str, default: Any = None) -> Any:
        stored = self._values.get(key)
        return default if stored is None else json.loads(stored)

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        if value is None:
            raise ValueError("Cannot set value as None")
        self._values[key] = json.dumps(value)

    def delete(self, key: str) -> None:
        self._values.pop(key, None)

    def clear(self) -> None:
        self._values.clear()

    def keys(self) -> list[str]:
        """The keys set, for assertions."""
        return sorted(self._values)


_STORES: dict[Scope, FakeTaskStateStore] = {}


def store_for(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> FakeTaskStateStore:
    """The one store of that task instance in this test (see :func:`forget_all`)."""
    return _STORES.setdefault((dag_id, run_id, task_id, map_index), FakeTaskStateStore())


def forget_all() -> None:
    """Drop every store: called between tests, so no test reads another's tries."""
    _STORES.clear()

"""What this provider keeps in Airflow's task state store, and the task states it reads.

Airflow 3.3's ``task_state_store`` (``context["task_state_store"]`` in a task, the
``task_state_store`` table for the api-server, values JSON as the execution API stores them:
``airflow/api_fastapi/execution_api/routes/task_state_store.py``) is keyed by dag, run, task and map
index, not by try, so it survives retries and worker crashes. Two keys, both written by
``operators.lifecycle`` only and read by the operator and the UI plugin through this module:

- :data:`TRIES_KEY`: a list of finished-try records (``records.tries.TryRecord``), one per try;
- :data:`CURRENT_KEY`: the try in progress (``records.tries.TryState``), written before its first
  object is created.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation.records.tries import TryRecord, TryState

TRIES_KEY = "gang.tries"
CURRENT_KEY = "gang.current"

FINAL_TASK_STATES = frozenset({"failed", "success", "skipped", "upstream_failed", "removed"})
"""Task instance states after which no try runs again unless a user clears the task (Airflow's
``TaskInstanceState`` members in ``State.finished``, ``airflow/utils/state.py``)."""


def read_tries(stored: Any) -> list[TryRecord]:
    """The finished tries stored under :data:`TRIES_KEY`, oldest first (nothing stored: none)."""
    if stored is None:
        return []
    if not isinstance(stored, list):
        raise ValueError(f"{TRIES_KEY} holds a {type(stored).__name__}, not a list")
    return [TryRecord.from_dict(item) for item in stored]


def read_current(stored: Any) -> TryState | None:
    """The try in progress stored under :data:`CURRENT_KEY`; ``None`` when nothing is stored."""
    return None if stored is None else TryState.from_dict(stored)

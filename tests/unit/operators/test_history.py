"""``operators.history.TryHistory`` keeps a task instance's tries in the task state store only."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.operators.history import TRIES_KEY, TryHistory, TryRecord
from tests.task_state_store import FakeTaskStateStore

RECORD = TryRecord(
    attempt=1, gang="g-t1", step="as configured", step_index=None, mode="provisioning_request", size=2,
    outcome="deadline", message="no capacity by the deadline", retryable=True,
)  # fmt: skip


class Instance:
    dag_id, run_id, task_id, map_index = "d", "r", "train", -1


def test_a_context_without_a_task_state_store_is_refused() -> None:
    with pytest.raises(RuntimeError, match="task_state_store"):
        TryHistory({"ti": Instance()})


def test_tries_are_read_back_from_the_store_by_a_later_context() -> None:
    store = FakeTaskStateStore()
    first: dict[str, Any] = {"ti": Instance(), "task_state_store": store}
    TryHistory(first).store_current({"plan": {"attempt": 1}})
    TryHistory(first).record(RECORD, drop_current=True)
    TryHistory(first).record(RECORD, drop_current=True)  # a resumed worker finishing the same try again
    later = TryHistory({"ti": Instance(), "task_state_store": store})
    assert later.finished() == [RECORD]
    assert later.current() is None
    assert store.keys() == [TRIES_KEY]  # the try in progress was dropped with its record

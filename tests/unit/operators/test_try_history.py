"""``operators.try_history.TryHistory`` keeps a task instance's tries in the task state store only."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.task_state import TRIES_KEY
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from tests.builders import gang_spec
from tests.task_state_store import FakeTaskStateStore

RECORD = TryRecord(
    attempt=1, gang="g-t1", step="as configured", step_index=None, mode="provisioning_request", size=2,
    outcome="deadline", message="no capacity by the deadline", retryable=True,
)  # fmt: skip
IN_PROGRESS = TryState(
    plan=TryPlan(
        attempt=1, gang="g-t1", step="as configured", step_index=None, spec=gang_spec(name="g-t1"),
        requested_at=1000.0, reservation_deadline=4600.0, deadline_reason=Reason.DEADLINE, start_deadline=None,
    )
)  # fmt: skip


class Instance:
    dag_id, run_id, task_id, map_index = "d", "r", "train", -1


def test_a_context_without_a_task_state_store_is_refused() -> None:
    with pytest.raises(RuntimeError, match="task_state_store"):
        TryHistory({"ti": Instance()})


def test_tries_are_read_back_from_the_store_by_a_later_context() -> None:
    store = FakeTaskStateStore()
    first: dict[str, Any] = {"ti": Instance(), "task_state_store": store}
    TryHistory(first).store_current(IN_PROGRESS)
    assert TryHistory({"ti": Instance(), "task_state_store": store}).current() == IN_PROGRESS
    TryHistory(first).record(RECORD, drop_current=True)
    TryHistory(first).record(RECORD, drop_current=True)  # a resumed worker finishing the same try again
    later = TryHistory({"ti": Instance(), "task_state_store": store})
    assert later.finished() == [RECORD]
    assert later.current() is None
    assert store.keys() == [TRIES_KEY]  # the try in progress was dropped with its record

"""Driving one operator by hand, step by step, as the task runner would: for the tests that need to
act between steps (kill a deferred task, crash a worker, let a booking expire).

The context's ``task_state_store`` is a fake (``tests.task_state_store``), shared by every
``FakeTaskInstance`` of the same dag/run/task/map index, as Airflow's store is scoped.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pytest

from airflow_provider_gang.airflow_compat import TaskDeferred
from tests import task_state_store


@dataclass
class FakeTaskInstance:
    dag_id: str
    run_id: str
    task_id: str = "train"
    try_number: int = 1
    max_tries: int = 3
    map_index: int = -1
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


def context_for(ti: FakeTaskInstance) -> dict[str, Any]:
    return {
        "ti": ti,
        "data_interval_end": datetime.now(timezone.utc),
        "dag_run": None,
        "task_state_store": task_state_store.store_for(ti.dag_id, ti.run_id, ti.task_id, ti.map_index),
    }


def deferred(call: Any, *args: Any) -> Any:
    """Call an operator entry point that must defer; return the trigger it deferred to."""
    with pytest.raises(TaskDeferred) as caught:
        call(*args)
    return caught.value.trigger


def first_event(trigger: Any, timeout: float = 120) -> dict[str, Any]:
    """Run a trigger until its first event (as the triggerer would), then clean it up."""

    async def run() -> dict[str, Any]:
        events = trigger.run()
        try:
            event = await asyncio.wait_for(anext(events), timeout)
        finally:
            await events.aclose()
            await trigger.cleanup()
        return dict(event.payload)

    return asyncio.run(run())


def delete_like_on_kill(trigger: Any) -> int:
    """What the trigger's ``on_kill`` does once it has checked the task is no longer deferred."""

    async def run() -> int:
        try:
            return int(await trigger.delete_gang_objects())
        finally:
            await trigger.cleanup()

    return asyncio.run(run())

"""What every fault-injection scenario shares: a task driven try by try as Airflow would, a ledger
of every object the emulator stored, and the invariants checked after the task ends.

Faults are injected from outside the provider only: the emulator's ``/_sim/faults`` and its
request log ``/_sim/requests`` (:mod:`tests.reliability.emulator_side`), a trigger cancelled and
rebuilt from ``serialize()``, ``on_kill``, a killed process.

Invariants (``Verdict``), all of which must be zero:

- **duplicates**: two live objects for one role of one gang at the same moment (two ProvisioningRequests,
  two pods of rank 3...), from the store's committed changes;
- **orphans**: objects of the task's gangs still stored once the task ended (30 s grace for the
  garbage collector);
- **wrong ladder steps**: a try whose recorded step is not the one ``reservation.ladder_choice.choose_step``
  gives for the recorded outcomes before it (with the ladder the record says it walked);
- **misrecorded tries**: a try that ran but has no record, a record with an unknown reason, or a last
  record that disagrees with how the task ended (success, failure, kill).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowTaskTerminated, TaskDeferred

from airflow_provider_gang.operators.failures import GangFailedForGood
from airflow_provider_gang.operators.try_history import TryHistory
from airflow_provider_gang.reservation import ladder_choice
from airflow_provider_gang.reservation.phases import Reason, is_ladder_input, is_retryable
from airflow_provider_gang.reservation.records.tries import TryRecord
from gang_sim.testing.eventually import eventually
from tests.e2e.driving import FakeTaskInstance, context_for
from tests.integration.triggers.gangs import first_event
from tests.reliability.emulator_side import Ledger

QUICK_CLIENT = {"retry_attempts": 3, "retry_base_delay": 0.02, "retry_max_delay": 0.1, "request_timeout": 10.0}
"""Every call of a try gives up after 3 attempts within ~0.2 s: "past the client's retries" is cheap."""
SIM_SPEED = 40.0
"""Simulated seconds per wall second: node provisioning (60 s) takes 1.5 s, and a 10-minute booking
15 s - room for a deferred task to resume on a loaded 2-core machine before it expires."""


def rebuild(trigger: Any) -> Any:
    """A new trigger from ``serialize()``, as a triggerer builds it from the trigger table."""
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


async def first_event_of(trigger: Any, timeout: float = 120.0) -> dict[str, Any]:
    """The trigger's first event as a triggerer gets it (``cleanup()`` always runs); a wait may last
    the whole reservation window, hence the longer default."""
    return await first_event(trigger, timeout)


def record_the_killed_try(op: Any, dag_id: str) -> TaskRun:
    """The next try, refused by ``start_by``, records the try a user killed while it was deferred (a
    trigger cannot write the task state store); it also withdraws leftovers, so callers check for
    those before."""
    later: Any = context_for(FakeTaskInstance(dag_id, "run-1", try_number=2))
    later["data_interval_end"] = datetime.now(timezone.utc) - timedelta(hours=2)
    with pytest.raises(Exception, match="start_window_missed"):
        op.execute(later)
    records = TryHistory(later).finished()
    assert [(record.attempt, record.outcome) for record in records][:1] == [(1, "killed")]
    return TaskRun("failed", 2, records, None, None, later)


TriggerRunner = Callable[[Any], dict[str, Any]]


def run_in_triggerer(trigger: Any) -> dict[str, Any]:
    """The default: rebuild the trigger from its serialized form and run it to its first event."""
    return asyncio.run(first_event_of(rebuild(trigger)))


@dataclass
class TaskRun:
    """How a task instance ended after all its tries: ``outcome`` is ``success``, ``failed`` or ``killed``."""

    outcome: str
    tries_run: int
    records: list[TryRecord]
    summary: dict[str, Any] | None
    error: BaseException | None
    context: dict[str, Any]


def run_task(
    operator: Any,
    dag_id: str,
    run_id: str = "run-1",
    *,
    max_tries: int | None = None,
    run_trigger: TriggerRunner = run_in_triggerer,
    before_try: Callable[[int], None] | None = None,
    context_changes: dict[str, Any] | None = None,
    first_try: int = 1,
) -> TaskRun:
    """Drive every try of one task instance as Airflow's task runner would: ``execute``; on
    ``TaskDeferred`` run the trigger and resume at its method; a retryable failure (or any other
    exception) starts the next try while tries remain; ``GangFailedForGood`` and
    ``AirflowTaskTerminated`` end the task. ``first_try`` > 1 continues a task instance whose
    earlier tries ran elsewhere (``context_changes`` then carries their ``task_state_store``)."""
    total = max_tries if max_tries is not None else (operator.retries or 0) + 1
    context: dict[str, Any] = {}
    error: BaseException | None = None
    for try_number in range(first_try, total + 1):
        if before_try is not None:
            before_try(try_number)
        context = context_for(FakeTaskInstance(dag_id, run_id, try_number=try_number, max_tries=total))
        context.update(context_changes or {})
        try:
            summary = _drive(operator, context, run_trigger)
            return TaskRun("success", try_number, TryHistory(context).finished(), summary, None, context)
        except (GangFailedForGood, AirflowTaskTerminated) as final:
            outcome = "killed" if isinstance(final, AirflowTaskTerminated) else "failed"
            return TaskRun(outcome, try_number, TryHistory(context).finished(), None, final, context)
        except Exception as failed:  # GangTryFailed, or anything Airflow would retry
            error = failed
    return TaskRun("failed", total, TryHistory(context).finished(), None, error, context)


def _drive(operator: Any, context: dict[str, Any], run_trigger: TriggerRunner) -> Any:
    step: Callable[[], Any] = lambda: operator.execute(context)  # noqa: E731
    while True:
        try:
            return step()
        except TaskDeferred as deferral:
            event = run_trigger(deferral.trigger)
            method = getattr(operator, deferral.method_name)
            step = lambda method=method, event=event: method(context, event)  # noqa: E731


@dataclass
class Verdict:
    duplicates: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    wrong_steps: list[str] = field(default_factory=list)
    misrecorded: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return [*self.duplicates, *self.orphans, *self.wrong_steps, *self.misrecorded]


def check(
    run: TaskRun,
    ledger: Ledger,
    *,
    grace: float = 30.0,
    keeps_objects: bool = False,
    start_deadline: float | None = None,
) -> Verdict:
    """The invariants of the module docstring for a finished ``run``."""
    verdict = Verdict(duplicates=list(ledger.duplicates))
    gangs = {record.gang for record in run.records if record.gang} | set(ledger.created_at)
    if not keeps_objects:
        with contextlib.suppress(AssertionError):  # what is still there after the grace is an orphan
            eventually(lambda: not ledger.objects_of(gangs), timeout=grace, what="the gangs' objects deleted")
        verdict.orphans = [f"orphan {key}" for key in ledger.objects_of(gangs)]
    attempts = [record.attempt for record in run.records]
    if attempts != list(range(1, run.tries_run + 1)):
        verdict.misrecorded.append(f"tries {list(range(1, run.tries_run + 1))} ran, records say {attempts}")
    known = {reason.value for reason in Reason}
    verdict.misrecorded += [
        f"try {record.attempt}: unknown reason {record.outcome!r}"
        for record in run.records
        if record.outcome not in known
    ]
    if run.records and run.records[-1].outcome in known:
        last = Reason(run.records[-1].outcome)
        expected = {
            "success": last is Reason.ALL_SUCCEEDED,
            "killed": last is Reason.KILLED,
            "failed": last not in (Reason.ALL_SUCCEEDED, Reason.KILLED),
        }[run.outcome]
        if not expected:
            verdict.misrecorded.append(f"the task ended {run.outcome} but its last try is recorded {last.value}")
    verdict.wrong_steps = wrong_steps(run.records)
    if start_deadline is not None:
        late = [gang for gang, moment in ledger.created_at.items() if moment > start_deadline]
        verdict.wrong_steps += [f"gang {gang} created after start_by" for gang in late]
    return verdict


def wrong_steps(records: list[TryRecord]) -> list[str]:
    """Tries whose step differs from the one the recorded history before them calls for."""
    problems = []
    sequence: list[TryRecord] = []
    for record in records:
        reason = Reason(record.outcome) if record.outcome in {r.value for r in Reason} else Reason.INVALID
        if record.gang and record.ladder is not None and is_ladder_input(reason) and record.adopted_from is None:
            ladder = record.ladder
            outcomes = [
                ladder_choice.TryOutcome(
                    position,
                    item.step_index,
                    Reason(item.outcome),
                    repeated=item.repeated,
                    node_reclaimed=item.node_reclaimed,
                )
                for position, item in enumerate(sequence, start=1)
            ]
            choice = ladder_choice.choose_step(ladder, len(sequence) + 1, outcomes)
            if choice.step_index != record.step_index:
                problems.append(
                    f"try {record.attempt} used step {record.step_index}, the history calls for "
                    f"{choice.step_index} ({choice.explanation})"
                )
        if is_ladder_input(reason):
            sequence = [] if not is_retryable(reason) else [*sequence, record]
    return problems


@dataclass
class TriggerRun:
    """One trigger as :class:`RecordingTriggerRunner` ran it: the rebuilt trigger (its reflectors'
    ``stats`` stay readable), the payload of its first event and the wall-clock seconds it took."""

    trigger: Any
    payload: dict[str, Any]
    seconds: float


@dataclass
class RecordingTriggerRunner:
    """A ``run_trigger`` for :func:`run_task` that keeps every trigger it ran.

    Each trigger is rebuilt from ``serialize()`` as a triggerer would, with ``changes(trigger_class,
    kwargs)`` applied to the serialized kwargs first (e.g. a shorter ``watch_timeout_seconds`` for
    one class), then run to its first event within ``timeout`` seconds.
    """

    changes: Callable[[type, dict[str, Any]], dict[str, Any]] | None = None
    timeout: float = 120.0
    runs: list[TriggerRun] = field(default_factory=list)

    def __call__(self, trigger: Any) -> dict[str, Any]:
        classpath, kwargs = trigger.serialize()
        module, _, name = classpath.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        if self.changes is not None:
            kwargs = self.changes(cls, dict(kwargs))
        rebuilt = cls(**kwargs)
        started = time.monotonic()
        payload = asyncio.run(first_event_of(rebuilt, timeout=self.timeout))
        self.runs.append(TriggerRun(rebuilt, payload, time.monotonic() - started))
        return payload

    def of_class(self, cls: type) -> list[TriggerRun]:
        return [run for run in self.runs if isinstance(run.trigger, cls)]


def dag_task_run(dag_id: str, run_id: str, task_id: str = "train") -> TaskRun:
    """How one task instance of a finished ``dag.test()`` run ended, as a :class:`TaskRun` for
    :func:`check`: ``outcome`` from its state, ``tries_run`` its try number, ``records`` the ``tries``
    of its XCom summary (only a successful task pushes one: a failed task has no records)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        ti = session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == task_id
            )
        ).one()
        row = session.scalars(
            XComModel.get_many(run_id=run_id, key="return_value", task_ids=task_id, dag_ids=dag_id)
        ).first()
        summary = XComModel.deserialize_value(row) if row is not None else None
        state, tries_run = str(ti.state), int(ti.try_number)
    records = [TryRecord.from_dict(item) for item in (summary or {}).get("tries", [])]
    outcome = "success" if state == "success" else "failed"
    return TaskRun(outcome, tries_run, records, summary, None, {"state": state})


def dag_run_ids(dag_id: str) -> set[str]:
    """The run ids of ``dag_id`` in the metadata database (to find the one a ``dag.test()`` added)."""
    from airflow.models.dagrun import DagRun

    return {str(run.run_id) for run in DagRun.find(dag_id=dag_id)}

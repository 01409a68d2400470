"""Whether a gang found on the cluster may be withdrawn: a pure function of what Airflow says of its
task instance (:func:`judge`).

A gang may be withdrawn when no try of its task instance can use it any more:

- its task instance is in a final state (``reservation.records.task_state.FINAL_TASK_STATES``):
  only a user clearing the task runs it again, and that new try starts a gang of its own (a try
  adopts only the gang of a try left *in progress*, ``reservation.tries.plan``);
- its task instance is gone: no task state of this Airflow names the gang (``gang.current`` is
  written before a try creates anything, so a gang always has one while its task instance
  exists) - its DAG run was deleted, or another Airflow created it (one namespace per Airflow
  installation, or ``--keep-unknown``);
- its task instance belongs to an ``airflow dags test`` run (``DagRun.triggered_by == "test"``)
  whose process is dead, and does not wait for a retry (:data:`NEVER_STRANDED`): ``dag.test()``
  runs the whole run in that one process, recorded in the task instance's ``hostname`` and ``pid``,
  and nothing else ever moves it on (the scheduler's check for tasks without heartbeat covers only
  the tasks it queued itself, ``_find_task_instances_without_heartbeats`` in
  ``airflow/jobs/scheduler_job_runner.py``).

Every other state keeps the gang: ``running``, ``deferred``, ``queued``, ``scheduled``, no state,
``up_for_retry`` and ``restarting`` mean a try runs or is on its way, and a retry adopts the gang
(``up_for_retry``!). A gang already being deleted is left to the garbage collector.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_gang.reservation.records.task_state import FINAL_TASK_STATES

TEST_RUN = "test"
"""``DagRun.triggered_by`` of a run made by ``dag.test()`` / ``airflow dags test``."""


@dataclass(frozen=True)
class TaskInstanceKey:
    """Which task instance: dag, run, task, map index (``-1``: not mapped)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1

    def describe(self) -> str:
        mapped = f"[{self.map_index}]" if self.map_index >= 0 else ""
        return f"{self.dag_id}/{self.run_id}/{self.task_id}{mapped}"


@dataclass(frozen=True)
class TaskInstanceFacts:
    """What the metadata database says of a gang's task instance.

    ``state``: a ``TaskInstanceState`` value, ``None`` for no state; ``try_number``: its current try;
    ``triggered_by``: its DAG run's ``triggered_by`` value; ``process_alive``: for a ``dags test``
    run, whether the process recorded in the task instance (``hostname``, ``pid``) still runs -
    ``None`` when that cannot be told (another host, no pid recorded).
    """

    key: TaskInstanceKey
    state: str | None
    try_number: int
    triggered_by: str | None = None
    process_alive: bool | None = None


@dataclass(frozen=True)
class Verdict:
    """``withdraw``: whether the gang may be deleted; ``reason``: why, in words for the sweep's output."""

    withdraw: bool
    reason: str


def judge(facts: TaskInstanceFacts | None, *, deleting: bool = False) -> Verdict:
    """Keep or withdraw a gang whose task instance is ``facts`` (``None``: none known) - the rules of
    the module docstring, in that order after "already being deleted"."""
    if deleting:
        return Verdict(False, "already being deleted")
    if facts is None:
        return Verdict(True, "no task instance of this Airflow knows it (its DAG run was deleted)")
    where = facts.key.describe()
    if facts.state in FINAL_TASK_STATES:
        return Verdict(True, f"task instance {where} is {facts.state}")
    state = "no state" if facts.state is None else facts.state
    if is_stranded_test_run(facts):
        return Verdict(
            True, f"task instance {where} ({state}) belongs to an `airflow dags test` run whose process is gone"
        )
    return Verdict(False, f"task instance {where} is {state}: a try runs or is on its way and may adopt it")


NEVER_STRANDED = frozenset({"up_for_retry"})
"""States that keep a gang even in a dead ``dags test`` run: a scheduler sharing the database runs
the retry, and the retry adopts the gang."""


def is_stranded_test_run(facts: TaskInstanceFacts) -> bool:
    """A task instance of a ``dags test`` run, not final nor waiting for its retry, whose process is
    known to be dead."""
    return (
        facts.triggered_by == TEST_RUN
        and facts.process_alive is False
        and facts.state not in FINAL_TASK_STATES | NEVER_STRANDED
    )

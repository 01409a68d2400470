"""What the Airflow listener (``plugin.listener``) does, apart from Airflow's hook signatures.

- :func:`task_instance_ended`: a task instance reached a state. Final (``failed``, ``success``...;
  never ``up_for_retry``: the retry adopts the gang) and reported by a process with the metadata
  database - the scheduler failing a task without heartbeat (``TaskInstance.handle_failure``), the
  api-server applying a user's "mark failed / success" - withdraws every gang of every try of that
  task instance (``withdrawal.withdraw_gangs``: a gang a newer try claimed is kept). In the
  scheduler and the api-server the withdrawal runs in a thread of its own, so a slow or unreachable
  cluster never holds up the scheduler loop or the request; in a worker nothing is done, because
  the try's own teardown (``operators.execution.guarded``) ran in that process just before.
- :func:`task_instance_started`: a gang task starts running inside ``airflow dags test``
  (``dag.test()``, the in-process supervisor): the gangs of the same task left by earlier ``dags
  test`` runs whose process is dead (``verdict.is_stranded_test_run``) are withdrawn before this
  run reserves, so an orphan request cannot book the nodes this run needs.

Both never raise: a failure is logged (the task state change it follows must not fail), and what is
left is found by the next run, the next final state or the sweep. Which cluster: the task's
``kubernetes_conn_id`` (serialized with the DAG, ``GangTrainingOperator.get_serialized_fields``; read
from the DAG version the task instance ran when the api-server hands over the row without its task,
``sweep.serialized_tasks``), in the task's namespace, or the namespaces its stored tries used while
it is still templated (on Airflow 3.1 and 3.2, its rendered namespace: ``airflow_state``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from airflow_provider_gang.reservation.records.task_state import FINAL_TASK_STATES
from airflow_provider_gang.reservation.tries import argument_record
from airflow_provider_gang.sweep import airflow_state, serialized_tasks, withdrawal
from airflow_provider_gang.sweep.verdict import TaskInstanceKey

log = logging.getLogger(__name__)

DEFAULT_CONN_ID = argument_record.default("kubernetes_conn_id")
"""``GangTrainingOperator``'s default ``kubernetes_conn_id`` (a DAG serialized before the
connection id was serialized has none)."""
_RUNNING_WITHDRAWALS: set[threading.Thread] = set()


def state_of(task_instance: Any) -> str | None:
    """The task instance's state as a ``TaskInstanceState`` value (``None``: no state)."""
    state = getattr(task_instance, "state", None)
    return None if state is None else str(getattr(state, "value", state))


def key_of(task_instance: Any) -> TaskInstanceKey:
    map_index = getattr(task_instance, "map_index", -1)
    return TaskInstanceKey(
        str(task_instance.dag_id),
        str(task_instance.run_id),
        str(task_instance.task_id),
        -1 if map_index is None else int(map_index),
    )


def is_gang_task(task_instance: Any) -> bool:
    """Whether the task instance runs a ``GangTrainingOperator`` (the operator itself in a worker, its
    serialized form in the scheduler and the api-server)."""
    task = getattr(task_instance, "task", None)
    names = {getattr(task_instance, "operator", None), getattr(task, "task_type", None), type(task).__name__}
    return bool(names & set(airflow_state.GANG_OPERATORS))


def in_worker(task_instance: Any) -> bool:
    """Reported by the task runner (``RuntimeTaskInstance``), not by a process with the database."""
    return type(task_instance).__module__.startswith("airflow.sdk")


def in_dag_test() -> bool:
    """The task runs inside ``dag.test()`` (the in-process supervisor: the database is at hand)."""
    from airflow.sdk.execution_time import task_runner

    return type(getattr(task_runner, "SUPERVISOR_COMMS", None)).__name__ == "InProcessSupervisorComms"


def cluster_of(task_instance: Any, key: TaskInstanceKey, *, stored: bool) -> tuple[str, list[str]]:
    """The connection id and the namespaces of the task instance's gangs (``stored``: also those of
    its stored try, read from the database)."""
    task = getattr(task_instance, "task", None)
    if task is None:  # an ORM row the api-server hands over without its task (``serialized_tasks``)
        fields = serialized_tasks.task_fields(getattr(task_instance, "dag_version_id", None), key.task_id)
    else:
        fields = {name: getattr(task, name, None) for name in serialized_tasks.TASK_FIELDS}
    conn_id = fields.get("kubernetes_conn_id") or DEFAULT_CONN_ID
    namespaces = []
    namespace = fields.get("namespace")
    if isinstance(namespace, str) and namespace and "{{" not in namespace:
        namespaces.append(namespace)
    if stored:
        namespaces.extend(airflow_state.stored_namespaces(key))
    return str(conn_id), list(dict.fromkeys(namespaces)) or ["default"]


def withdraw(conn_id: str, namespaces: list[str], gangs: list[str], up_to_try: int, what: str) -> None:
    """Withdraw ``gangs`` in each namespace of ``conn_id``'s cluster; logs, never raises."""
    try:
        from airflow_provider_gang.hooks.gang import GangHook

        settings = GangHook(conn_id=conn_id).connection_settings()
        deleted = 0
        for namespace in namespaces:
            deleted += asyncio.run(
                withdrawal.withdraw_gangs(settings, namespace, gangs, up_to_try=up_to_try, log=log.info)
            )
        log.info("Gang clean-up (%s): withdrew %d objects of %s on %s", what, deleted, ", ".join(gangs), conn_id)
    except Exception:
        log.exception(
            "Gang clean-up (%s) failed; what is left is withdrawn by the next final state or by "
            "`python -m airflow_provider_gang.sweep --delete`",
            what,
        )


def task_instance_ended(task_instance: Any) -> threading.Thread | None:
    """See the module docstring; the thread doing the withdrawal (``None``: nothing to do)."""
    try:
        state = state_of(task_instance)
        if state not in FINAL_TASK_STATES or in_worker(task_instance) or not is_gang_task(task_instance):
            return None
        key = key_of(task_instance)
        try_number = int(getattr(task_instance, "try_number", 0) or 0)
        gangs = airflow_state.gang_names_of(key, try_number)
        conn_id, namespaces = cluster_of(task_instance, key, stored=True)
    except Exception:
        log.exception("Gang clean-up: could not read the task instance that ended")
        return None
    what = f"task instance {key.describe()} is {state}"
    thread = threading.Thread(
        target=_run_and_forget,
        args=(conn_id, namespaces, gangs, try_number, what),
        name=f"gang-withdraw-{key.describe()}",
        daemon=True,
    )
    _RUNNING_WITHDRAWALS.add(thread)
    thread.start()
    return thread


def _run_and_forget(conn_id: str, namespaces: list[str], gangs: list[str], up_to_try: int, what: str) -> None:
    try:
        withdraw(conn_id, namespaces, gangs, up_to_try, what)
    finally:
        _RUNNING_WITHDRAWALS.discard(threading.current_thread())


def task_instance_started(task_instance: Any) -> None:
    """See the module docstring; runs inline (``dag.test()`` has nothing else to do meanwhile)."""
    try:
        if not is_gang_task(task_instance) or not in_dag_test():
            return
        key = key_of(task_instance)
        stranded = airflow_state.stranded_test_runs_of(key.dag_id, key.task_id, except_run=key.run_id)
        if not stranded:
            return
        conn_id, namespaces = cluster_of(task_instance, key, stored=False)
    except Exception:
        log.exception("Gang clean-up: could not look for what earlier `airflow dags test` runs left")
        return
    for facts in stranded:
        gangs = airflow_state.gang_names_of(facts.key, facts.try_number)
        what = f"task instance {facts.key.describe()} of a killed `airflow dags test` run"
        withdraw(conn_id, namespaces, gangs, facts.try_number, what)


def wait_for_withdrawals(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the running withdrawals (tests; a process about to exit)."""
    for thread in list(_RUNNING_WITHDRAWALS):
        thread.join(timeout)
    return not any(thread.is_alive() for thread in _RUNNING_WITHDRAWALS)

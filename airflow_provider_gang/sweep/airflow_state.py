"""What the metadata database says of the gangs' task instances (run where the database is: the
scheduler, the api-server, ``airflow dags test``, the sweep command).

A gang is traced to its task instance by name: every try stores its plan (with the gang name) in the
task state store before it creates anything (``gang.current``), and its record (``gang.tries``)
when it ends (``reservation.records.task_state``); names are also derived for every try of the task
instances of :data:`GANG_OPERATORS` (``reservation.naming.gang_name``), for task state rows removed
by ``[task_state_store] default_retention_days``. Airflow's models are imported inside the functions,
as ``plugin.stored_records`` does.

Airflow 3.1 and 3.2 have no task state store: a try keeps its history in a ConfigMap on the cluster
(``operators.try_history.ClusterTryStore``), which the database cannot read. There the names are the
derived ones only, and a task instance's namespace is its rendered ``namespace`` template field
(``rendered_task_instance_fields``, written when a try starts, before ``execute``) - the namespace
the history ConfigMap is in. :func:`has_task_state_store` tells which, by feature detection.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY
from airflow_provider_gang.sweep.verdict import TEST_RUN, TaskInstanceFacts, TaskInstanceKey

GANG_OPERATORS = ("GangTrainingOperator",)
"""``TaskInstance.operator`` values of gang tasks (the class name Airflow records)."""


@functools.cache
def has_task_state_store() -> bool:
    """Whether this Airflow keeps a task state store (3.3 and later; ``airflow.models.task_state_store``
    imports). Asked once per process: a missing module is looked for again on every import attempt."""
    try:
        from airflow.models.task_state_store import TaskStateStoreModel  # noqa: F401
    except ImportError:
        return False
    return True


def gang_names_of(key: TaskInstanceKey, try_number: int) -> list[str]:
    """The gang names every try ``1..try_number`` of the task instance ``key`` would use."""
    return [
        naming.gang_name(key.dag_id, key.task_id, key.run_id, map_index=key.map_index, attempt=attempt)
        for attempt in range(1, max(try_number, 1) + 1)
    ]


def stored_gang_names(stored: Iterable[tuple[str, str]]) -> list[str]:
    """The gang names in task state rows ``(key, JSON value)`` of :data:`CURRENT_KEY` / :data:`TRIES_KEY`
    (read leniently: a malformed row names nothing)."""
    names: list[str] = []
    for key, text in stored:
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            continue
        items = [value.get("plan")] if key == CURRENT_KEY and isinstance(value, dict) else value
        for item in items if isinstance(items, list) else []:
            gang = item.get("gang") if isinstance(item, dict) else None
            if isinstance(gang, str) and gang:
                names.append(gang)
    return names


def process_alive(hostname: str | None, pid: int | None, started: datetime | None) -> bool | None:
    """Whether process ``pid`` on ``hostname`` - the one that started the task instance at ``started``
    - still runs; ``None`` when that cannot be told here (another host, nothing recorded). A pid
    reused by a process that started later counts as dead."""
    import psutil  # type: ignore[import-untyped]  # an Airflow dependency, without stubs
    from airflow.utils.net import get_hostname

    this_host: Callable[[], Any] = get_hostname  # what Airflow records as TaskInstance.hostname
    if not hostname or not pid or hostname != this_host():
        return None
    try:
        created = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return False
    return started is None or created <= started.timestamp() + 1.0


def task_instances_by_gang() -> dict[str, TaskInstanceFacts]:
    """Every gang name this Airflow's database traces to a task instance, with that task instance's
    facts (see the module docstring)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import or_, select

    with create_session() as session:
        stored = _stored_tries(session)
        instances_query = (
            select(TaskInstance, DagRun.triggered_by)
            .join(DagRun, (DagRun.dag_id == TaskInstance.dag_id) & (DagRun.run_id == TaskInstance.run_id))
            .where(or_(TaskInstance.operator.in_(GANG_OPERATORS), TaskInstance.dag_id.in_({k.dag_id for k in stored})))
        )
        found: dict[str, TaskInstanceFacts] = {}
        for ti, triggered_by in session.execute(instances_query):
            key = TaskInstanceKey(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
            if key not in stored and ti.operator not in GANG_OPERATORS:
                continue
            facts = facts_of(ti, triggered_by)
            for gang in [*gang_names_of(key, facts.try_number), *stored_gang_names(stored.get(key, []))]:
                found[gang] = facts
    return found


def _stored_tries(session: Any) -> dict[TaskInstanceKey, list[tuple[str, str]]]:
    """The task state rows ``(key, JSON value)`` of :data:`CURRENT_KEY` / :data:`TRIES_KEY` by task
    instance; none where Airflow has no task state store."""
    if not has_task_state_store():
        return {}
    from airflow.models.task_state_store import TaskStateStoreModel
    from sqlalchemy import select

    query = select(
        TaskStateStoreModel.dag_id,
        TaskStateStoreModel.run_id,
        TaskStateStoreModel.task_id,
        TaskStateStoreModel.map_index,
        TaskStateStoreModel.key,
        TaskStateStoreModel.value,
    ).where(TaskStateStoreModel.key.in_((TRIES_KEY, CURRENT_KEY)))
    stored: dict[TaskInstanceKey, list[tuple[str, str]]] = {}
    for row in session.execute(query):
        key = TaskInstanceKey(row.dag_id, row.run_id, row.task_id, row.map_index)
        stored.setdefault(key, []).append((row.key, row.value))
    return stored


def facts_of(ti: Any, triggered_by: Any) -> TaskInstanceFacts:
    """The :class:`TaskInstanceFacts` of an ORM ``TaskInstance`` whose DAG run was ``triggered_by``."""
    trigger = None if triggered_by is None else str(getattr(triggered_by, "value", triggered_by))
    state = None if ti.state is None else str(getattr(ti.state, "value", ti.state))
    alive = process_alive(ti.hostname, ti.pid, ti.start_date) if trigger == TEST_RUN else None
    return TaskInstanceFacts(
        key=TaskInstanceKey(ti.dag_id, ti.run_id, ti.task_id, ti.map_index),
        state=state,
        try_number=int(ti.try_number or 0),
        triggered_by=trigger,
        process_alive=alive,
    )


def stranded_test_runs_of(dag_id: str, task_id: str, *, except_run: str) -> list[TaskInstanceFacts]:
    """The task instances of ``dag_id``/``task_id`` in other ``dags test`` runs than ``except_run``
    whose process is dead (``verdict.is_stranded_test_run``)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_provider_gang.sweep.verdict import is_stranded_test_run

    query = (
        select(TaskInstance, DagRun.triggered_by)
        .join(DagRun, (DagRun.dag_id == TaskInstance.dag_id) & (DagRun.run_id == TaskInstance.run_id))
        .where(TaskInstance.dag_id == dag_id, TaskInstance.task_id == task_id, TaskInstance.run_id != except_run)
    )
    with create_session() as session:
        candidates = [facts_of(ti, triggered_by) for ti, triggered_by in session.execute(query)]
    return [facts for facts in candidates if is_stranded_test_run(facts)]


def stored_namespaces(key: TaskInstanceKey) -> list[str]:
    """The namespaces the task instance's stored tries used (``gang.current``'s plan), newest last;
    where Airflow has no task state store, its rendered ``namespace`` (see the module docstring)."""
    if not has_task_state_store():
        return _rendered_namespace(key)
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(TaskStateStoreModel.value).where(
        TaskStateStoreModel.dag_id == key.dag_id,
        TaskStateStoreModel.run_id == key.run_id,
        TaskStateStoreModel.task_id == key.task_id,
        TaskStateStoreModel.map_index == key.map_index,
        TaskStateStoreModel.key == CURRENT_KEY,
    )
    with create_session() as session:
        values = list(session.scalars(query))
    namespaces = []
    for text in values:
        try:
            namespace = json.loads(text)["plan"]["spec"]["namespace"]
        except (TypeError, ValueError, KeyError):
            continue
        if isinstance(namespace, str):
            namespaces.append(namespace)
    return namespaces


def _rendered_namespace(key: TaskInstanceKey) -> list[str]:
    """The task instance's rendered ``namespace`` template field, if a try rendered one."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(Rendered.rendered_fields).where(
        Rendered.dag_id == key.dag_id,
        Rendered.run_id == key.run_id,
        Rendered.task_id == key.task_id,
        Rendered.map_index == key.map_index,
    )
    with create_session() as session:
        fields = session.scalars(query).first()
    namespace = fields.get("namespace") if isinstance(fields, dict) else None
    return [namespace] if isinstance(namespace, str) and namespace else []

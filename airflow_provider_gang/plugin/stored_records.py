"""What the metadata database holds of gang task instances, read in the api-server process, and the
provider's typed records read from it. Both pages read through this module; it owns every database
query of the plugin except where a history ConfigMap is kept (:mod:`.try_history`).

Reads of one task instance (the Gang view), each in its own session, returning stored values as
they are (plain JSON, Airflow enums as their string value):

- :func:`read_task_instance`: its state, ``next_method`` and try number (``task_instance`` table);
- :func:`read_past_try_numbers`: the numbers of its earlier tries (``task_instance_history``);
- :func:`read_gang_xcoms`: the reservation and summary XComs (``xcom`` table);
- :func:`read_task_state`: the task state store keys of the try history (``task_state_store``);
- :func:`read_trigger`: the trigger row it is deferred to (``trigger`` table, kwargs decrypted).

Reads of every gang task instance (the Gangs page), two queries per page whatever the number of rows:

- :func:`read_gang_tasks`: every task instance that has a gang try record or a try in progress
  (task state store keys ``gang.tries`` / ``gang.current``) in the DAGs the user may read, joined to
  its ``task_instance`` row: unfinished ones always, finished ones when their records changed within
  ``recent_seconds``; at most ``limit`` rows, newest first.
- :func:`read_gang_task_instances`: the same task instances where Airflow has no task state store
  (3.1, 3.2): those of ``sweep.airflow_state.GANG_OPERATORS``, recent by their own ``updated_at``;
  their history is read from the cluster (:mod:`.try_history`) and put in ``stored`` as the texts
  the store would hold.
- :func:`read_triggers`: the trigger rows of the deferred ones, by id, in one query (kwargs
  decrypted by ``Trigger.kwargs``, ``airflow/models/trigger.py``).

The typed reading - the only place in the plugin that interprets the stored formats: the try
records of ``gang.tries`` and the try in progress of ``gang.current``
(``reservation.records.tries.TryRecord``, ``reservation.records.task_state.read_current``) and the
kwargs of a gang trigger's row (``reservation.records.triggers.TriggerArguments``). A record that does
not read is logged and left out, so one bad row never hides the rest of a page; formatting for a
person is the pages' own.

Airflow's models are imported inside the functions: plugin modules are imported wherever plugins
load, before the ORM is configured there. The task state store keys are
``reservation.records.task_state``'s.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_gang.links import GANG_SUMMARY_XCOM_KEY, RESERVATION_XCOM_KEY, SUMMARY_XCOM_KEY
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.records.reading import RecordError
from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState
from airflow_provider_gang.reservation.records.triggers import TriggerArguments
from airflow_provider_gang.sweep.airflow_state import GANG_OPERATORS

log = logging.getLogger(__name__)

TaskKey = tuple[str, str, str, int]
"""A task instance: ``(dag_id, run_id, task_id, map_index)``."""


@dataclass(frozen=True)
class TaskInstanceRow:
    """What the ``task_instance`` table says of one task instance.

    ``exists`` is ``False`` when there is no such row; a task instance the scheduler created but has
    not scheduled yet exists with ``state`` ``None``. ``state`` is a ``TaskInstanceState`` value.
    """

    exists: bool
    state: str | None = None
    next_method: str | None = None
    try_number: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The row as the JSON API returns it."""
        return asdict(self)


@dataclass(frozen=True)
class StoredTaskState:
    """The two task state store keys, decoded from JSON but not interpreted.

    ``tries``: the items of ``gang.tries`` that are JSON objects (a missing or malformed key gives
    ``[]``); ``current``: ``gang.current`` if it is a JSON object, else ``None``.
    """

    tries: list[dict[str, Any]] = field(default_factory=list)
    current: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored values as the JSON API returns them."""
        return {"tries": list(self.tries), "current": self.current}


@dataclass(frozen=True)
class TriggerRow:
    """The ``trigger`` row a deferred task instance waits on: its class path and decrypted kwargs."""

    classpath: str
    kwargs: dict[str, Any]


def read_task_instance(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> TaskInstanceRow:
    """The state, resume method and try number of one task instance."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(TaskInstance.state, TaskInstance.next_method, TaskInstance.try_number).where(
        *of_task_instance(TaskInstance, (dag_id, run_id, task_id, map_index)),
    )
    with create_session() as session:
        row = session.execute(query).first()
    if row is None:
        return TaskInstanceRow(exists=False)
    return TaskInstanceRow(
        exists=True, state=state_value(row.state), next_method=row.next_method, try_number=row.try_number
    )


def read_past_try_numbers(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> list[int]:
    """The try numbers Airflow kept a history row for (``task_instance_history``: every try before
    the current one), in order - also the tries that ended before they recorded a gang record."""
    from airflow.models.taskinstancehistory import TaskInstanceHistory
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(TaskInstanceHistory.try_number).where(
        *of_task_instance(TaskInstanceHistory, (dag_id, run_id, task_id, map_index)),
    )
    with create_session() as session:
        return sorted({int(number) for number in session.scalars(query)})


def read_gang_xcoms(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
    """``{"reservation": ..., "summary": ...}``: the deserialized values of the XComs
    ``links.RESERVATION_XCOM_KEY`` and of ``links.GANG_SUMMARY_XCOM_KEY`` (a ``@task.gang`` task's
    summary), else ``links.SUMMARY_XCOM_KEY`` (the operator's); a missing XCom is left out."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    wanted = (
        ("reservation", RESERVATION_XCOM_KEY),
        ("summary", GANG_SUMMARY_XCOM_KEY),
        ("summary", SUMMARY_XCOM_KEY),
    )
    found: dict[str, Any] = {}
    with create_session() as session:
        for name, key in wanted:
            if name in found:
                continue
            query = XComModel.get_many(
                run_id=run_id, key=key, task_ids=task_id, dag_ids=dag_id, map_indexes=map_index, limit=1
            )
            row = session.scalars(query).first()
            if row is not None:
                found[name] = XComModel.deserialize_value(row)
    return found


def read_task_state(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> StoredTaskState:
    """``gang.tries`` and ``gang.current`` of one task instance (Airflow 3.3 ``task_state_store``
    table, values JSON as the execution API stores them:
    ``airflow/api_fastapi/execution_api/routes/task_state_store.py``). Airflow 3.1 and 3.2 have no
    such table (the history is on the cluster there, ``operators.try_history``, read by
    ``plugin.try_history``): nothing stored."""
    try:
        from airflow.models.task_state_store import TaskStateStoreModel
    except ImportError:  # Airflow before 3.3
        return StoredTaskState()
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(TaskStateStoreModel.key, TaskStateStoreModel.value).where(
        *of_task_instance(TaskStateStoreModel, (dag_id, run_id, task_id, map_index)),
        TaskStateStoreModel.key.in_((TRIES_KEY, CURRENT_KEY)),
    )
    with create_session() as session:
        stored = {row.key: row.value for row in session.execute(query)}
    return stored_task_state(stored)


def stored_task_state(stored: Mapping[str, str | None]) -> StoredTaskState:
    """The two keys from their stored JSON texts (the ``task_state_store`` table's values, or a
    history ConfigMap's ``data``: ``operators.try_history``); a text that is not JSON is logged and
    read as missing."""
    tries = _json(stored.get(TRIES_KEY), TRIES_KEY)
    current = _json(stored.get(CURRENT_KEY), CURRENT_KEY)
    return StoredTaskState(
        tries=[item for item in tries if isinstance(item, dict)] if isinstance(tries, list) else [],
        current=current if isinstance(current, dict) else None,
    )


def read_trigger(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> TriggerRow | None:
    """The trigger the task instance is deferred to, or ``None`` (kwargs decrypted by
    ``Trigger.kwargs``, ``airflow/models/trigger.py``)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = (
        select(Trigger)
        .join(TaskInstance, TaskInstance.trigger_id == Trigger.id)
        .where(
            *of_task_instance(TaskInstance, (dag_id, run_id, task_id, map_index)),
        )
    )
    with create_session() as session:
        row = session.scalars(query).first()
        return None if row is None else TriggerRow(str(row.classpath), dict(row.kwargs))


def state_value(state: Any) -> str | None:
    """A task instance state as stored: its enum's value, or the text itself."""
    return None if state is None else str(getattr(state, "value", state))


def of_task_instance(model: Any, key: TaskKey | tuple[Any, Any, Any, Any]) -> tuple[Any, ...]:
    """The SQL clauses matching the rows of ``model`` (a table keyed as ``task_instance`` is: dag, run,
    task, map index) to ``key``: values, or the key columns of another table to join on."""
    dag_id, run_id, task_id, map_index = key
    return (model.dag_id == dag_id, model.run_id == run_id, model.task_id == task_id, model.map_index == map_index)


def _json(text: str | None, key: str) -> Any:
    """The value of a stored JSON text; ``None`` for a missing or unreadable one (logged)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError) as error:
        log.warning("The stored %s of the task instance is not JSON (%s), left out", key, error)
        return None


UNFINISHED_STATES = ("deferred", "running", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "restarting")


@dataclass(frozen=True)
class GangTaskRow:
    """One gang task instance: its key, ``task_instance`` state, resume method, try number, trigger id
    and the raw JSON texts of its two task state store keys (``None``: not stored)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    state: str | None
    next_method: str | None
    try_number: int | None
    trigger_id: int | None
    stored: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> TaskKey:
        return (self.dag_id, self.run_id, self.task_id, self.map_index)


def read_gang_tasks(
    dag_ids: Collection[str], *, now: datetime.datetime, recent_seconds: float, limit: int
) -> list[GangTaskRow]:
    """The gang task instances of ``dag_ids`` (see the module docstring), one query."""
    from airflow.utils.session import create_session

    if not dag_ids:
        return []
    query = _gang_tasks_query(dag_ids, since=now - datetime.timedelta(seconds=recent_seconds), limit=limit)
    with create_session() as session:
        return _gang_task_rows(session.execute(query), limit)


def _gang_tasks_query(dag_ids: Collection[str], *, since: datetime.datetime, limit: int) -> Any:
    """Each stored key of the gang task instances of ``dag_ids`` with its task instance's columns,
    newest first: unfinished ones, and those whose keys changed ``since``; ``limit`` tasks have at most
    ``limit * 2`` rows (two keys each)."""
    from airflow.models.task_state_store import TaskStateStoreModel as Store
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import and_, or_, select

    columns = (Store.dag_id, Store.run_id, Store.task_id, Store.map_index, Store.key, Store.value)
    return (
        select(*columns, TaskInstance.state, TaskInstance.next_method, TaskInstance.try_number, TaskInstance.trigger_id)
        .join(
            TaskInstance,
            and_(*of_task_instance(TaskInstance, (Store.dag_id, Store.run_id, Store.task_id, Store.map_index))),
        )
        .where(
            Store.key.in_((TRIES_KEY, CURRENT_KEY)),
            Store.dag_id.in_(sorted(dag_ids)),
            or_(TaskInstance.state.in_(UNFINISHED_STATES), Store.updated_at >= since),
        )
        .order_by(Store.updated_at.desc())
        .limit(limit * 2)
    )


def _gang_task_rows(found: Iterable[Any], limit: int) -> list[GangTaskRow]:
    """One row per task instance of ``found`` (the first ``limit``, in order), its stored keys gathered."""
    rows: dict[TaskKey, GangTaskRow] = {}
    for row in found:
        key = (row.dag_id, row.run_id, row.task_id, row.map_index)
        if key not in rows:
            if len(rows) >= limit:
                continue
            rows[key] = GangTaskRow(*key, state_value(row.state), row.next_method, row.try_number, row.trigger_id)
        rows[key].stored[row.key] = row.value
    return list(rows.values())


def read_gang_task_instances(
    dag_ids: Collection[str], *, now: datetime.datetime, recent_seconds: float, limit: int
) -> list[GangTaskRow]:
    """The task instances of ``GANG_OPERATORS`` in ``dag_ids``: unfinished ones always, finished
    ones changed within ``recent_seconds``; at most ``limit``, newest first; ``stored`` empty. One query."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import or_, select

    if not dag_ids:
        return []
    since = now - datetime.timedelta(seconds=recent_seconds)
    query = (
        select(TaskInstance)
        .where(
            TaskInstance.operator.in_(GANG_OPERATORS),
            TaskInstance.dag_id.in_(sorted(dag_ids)),
            or_(TaskInstance.state.in_(UNFINISHED_STATES), TaskInstance.updated_at >= since),
        )
        .order_by(TaskInstance.updated_at.desc())
        .limit(limit)
    )
    with create_session() as session:
        return [
            GangTaskRow(
                ti.dag_id,
                ti.run_id,
                ti.task_id,
                ti.map_index,
                state_value(ti.state),
                ti.next_method,
                ti.try_number,
                ti.trigger_id,
            )
            for ti in session.scalars(query)
        ]


def read_triggers(trigger_ids: Sequence[int]) -> dict[int, tuple[str, dict[str, Any]]]:
    """Class path and decrypted kwargs of each trigger row, by id (one query)."""
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session
    from sqlalchemy import select

    if not trigger_ids:
        return {}
    with create_session() as session:
        found = session.scalars(select(Trigger).where(Trigger.id.in_(sorted(set(trigger_ids)))))
        return {int(row.id): (str(row.classpath), dict(row.kwargs)) for row in found}


GANG_TRIGGER_MODULES = "airflow_provider_gang.triggers."
"""Class path prefix of the provider's triggers: only their rows name a gang to read live."""


@dataclass(frozen=True)
class WatchedReservation:
    """What a gang trigger's row says about the objects its reservation waits on and how to reach
    the cluster (kwargs of ``triggers.base.GangTrigger``, documented in that module).

    Exactly one of ``kubernetes_conn_id`` and ``connection`` (``kube.settings.ConnectionSettings``
    as a dict) is set; ``client_options`` is ``kube.options.ClientOptions`` as a dict. For a run on a
    Kueue MultiKueue worker (``TriggerArguments.members_kubernetes_conn_id``) the cluster is the
    worker's: the members and the Workload the run watches are there.
    """

    namespace: str
    kubernetes_conn_id: str | None
    connection: dict[str, Any] | None
    provisioning_request: str | None
    workload_selector: str | None
    client_options: dict[str, Any]


def watched_reservation(trigger: TriggerRow | None) -> WatchedReservation | None:
    """The reservation a trigger row waits on; ``None`` for no row or another package's trigger.

    Raises ``ValueError`` for a row of the provider's triggers whose kwargs do not read as
    ``TriggerArguments`` (no gang: no namespace, or not exactly one of ``kubernetes_conn_id`` and
    ``connection``), naming what is wrong."""
    if trigger is None or not trigger.classpath.startswith(GANG_TRIGGER_MODULES):
        return None
    try:
        arguments = TriggerArguments.from_dict(trigger.kwargs)
    except RecordError as error:
        raise ValueError(f"{trigger.classpath} does not wait on a gang ({error})") from error
    return WatchedReservation(  # a run on a MultiKueue worker: its pods and Workload are there
        namespace=arguments.namespace,
        kubernetes_conn_id=arguments.members_kubernetes_conn_id or arguments.kubernetes_conn_id,
        connection=None if arguments.connection is None else dict(arguments.connection),
        provisioning_request=arguments.provisioning_request,
        workload_selector=arguments.workload_selector,
        client_options=dict(arguments.client_options),
    )


def read_tries(stored: Sequence[Mapping[str, Any]]) -> list[TryRecord]:
    """The records of ``gang.tries`` that read as a ``TryRecord``; the others are logged and left out
    (one unreadable record does not hide the others, unlike ``task_state.read_tries``)."""
    records = []
    for item in stored:
        try:
            records.append(TryRecord.from_dict(item))
        except RecordError as error:
            log.warning("A stored try record of the task instance does not read (%s): %r", error, item)
    return records


def read_current(stored: Mapping[str, Any] | None) -> TryState | None:
    """The try in progress from ``gang.current`` (``task_state.read_current``); ``None`` without one
    or for one that does not read (written by a newer provider: logged)."""
    try:
        return task_state.read_current(stored)
    except RecordError as error:
        log.warning("The stored try in progress does not read (%s)", error)
        return None

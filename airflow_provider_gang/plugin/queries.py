"""The metadata-database reads behind the Gang page, run in the api-server process.

Four reads of one task instance, each in its own session and each returning stored values as they
are (plain JSON, Airflow enums as their string value); what they mean is read by
:mod:`.page_model`:

- :func:`read_task_instance`: its state, ``next_method`` and try number (``task_instance`` table);
- :func:`read_past_try_numbers`: the numbers of its earlier tries (``task_instance_history``);
- :func:`read_gang_xcoms`: the reservation and summary XComs (``xcom`` table);
- :func:`read_task_state`: the task state store keys of the try history (``task_state_store``);
- :func:`read_trigger`: the trigger row it is deferred to (``trigger`` table, kwargs decrypted).

Airflow's models are imported inside the functions: plugin modules are imported wherever plugins
load, before the ORM is configured there. The task state store keys are
``reservation.records.task_state``'s.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_gang.links import GANG_SUMMARY_XCOM_KEY, RESERVATION_XCOM_KEY, SUMMARY_XCOM_KEY
from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY

log = logging.getLogger(__name__)


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
        TaskInstance.dag_id == dag_id,
        TaskInstance.run_id == run_id,
        TaskInstance.task_id == task_id,
        TaskInstance.map_index == map_index,
    )
    with create_session() as session:
        row = session.execute(query).first()
    if row is None:
        return TaskInstanceRow(exists=False)
    state = None if row.state is None else str(getattr(row.state, "value", row.state))
    return TaskInstanceRow(exists=True, state=state, next_method=row.next_method, try_number=row.try_number)


def read_past_try_numbers(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> list[int]:
    """The try numbers Airflow kept a history row for (``task_instance_history``: every try before
    the current one), in order - also the tries that ended before they recorded a gang record."""
    from airflow.models.taskinstancehistory import TaskInstanceHistory
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(TaskInstanceHistory.try_number).where(
        TaskInstanceHistory.dag_id == dag_id,
        TaskInstanceHistory.run_id == run_id,
        TaskInstanceHistory.task_id == task_id,
        TaskInstanceHistory.map_index == map_index,
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
    such table (the history is on the cluster there, ``operators.try_store``, read by
    ``plugin.try_history``): nothing stored."""
    try:
        from airflow.models.task_state_store import TaskStateStoreModel
    except ImportError:  # Airflow before 3.3
        return StoredTaskState()
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(TaskStateStoreModel.key, TaskStateStoreModel.value).where(
        TaskStateStoreModel.dag_id == dag_id,
        TaskStateStoreModel.run_id == run_id,
        TaskStateStoreModel.task_id == task_id,
        TaskStateStoreModel.map_index == map_index,
        TaskStateStoreModel.key.in_((TRIES_KEY, CURRENT_KEY)),
    )
    with create_session() as session:
        stored = {row.key: row.value for row in session.execute(query)}
    return stored_task_state(stored)


def stored_task_state(stored: Mapping[str, str | None]) -> StoredTaskState:
    """The two keys from their stored JSON texts (the ``task_state_store`` table's values, or a
    history ConfigMap's ``data``: ``operators.try_store``); a text that is not JSON is logged and
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
            TaskInstance.dag_id == dag_id,
            TaskInstance.run_id == run_id,
            TaskInstance.task_id == task_id,
            TaskInstance.map_index == map_index,
        )
    )
    with create_session() as session:
        row = session.scalars(query).first()
        return None if row is None else TriggerRow(str(row.classpath), dict(row.kwargs))


def _json(text: str | None, key: str) -> Any:
    """The value of a stored JSON text; ``None`` for a missing or unreadable one (logged)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError) as error:
        log.warning("The stored %s of the task instance is not JSON (%s), left out", key, error)
        return None

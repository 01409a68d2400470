"""The metadata-database reads behind the cluster-wide Gangs page: two queries per page, whatever
the number of rows.

- :func:`read_gang_tasks`: every task instance that has a gang try record or a try in progress
  (task state store keys ``gang.tries`` / ``gang.current``, ``reservation.records.task_state``) in
  the DAGs the user may read, joined to its ``task_instance`` row: unfinished ones always, finished
  ones when their records changed within ``recent_seconds``; at most ``limit`` rows, newest first.
- :func:`read_gang_task_instances`: the same task instances where Airflow has no task state store
  (3.1, 3.2): those of ``sweep.airflow_state.GANG_OPERATORS``, recent by their own ``updated_at``; their history is
  read from the cluster (:mod:`.history_maps`) and put in ``stored`` as the texts the store would hold.
- :func:`read_triggers`: the trigger rows of the deferred ones, by id, in one query (kwargs
  decrypted by ``Trigger.kwargs``, ``airflow/models/trigger.py``).

Values are returned as stored; :mod:`.overview` reads them. Airflow's models are imported inside
the functions, as in :mod:`.queries`.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY
from airflow_provider_gang.sweep.airflow_state import GANG_OPERATORS

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


def read_gang_tasks(
    dag_ids: Collection[str], *, now: datetime.datetime, recent_seconds: float, limit: int
) -> list[GangTaskRow]:
    """The gang task instances of ``dag_ids`` (see the module docstring), one query."""
    from airflow.models.task_state_store import TaskStateStoreModel as Store
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import and_, or_, select

    if not dag_ids:
        return []
    since = now - datetime.timedelta(seconds=recent_seconds)
    query = (
        select(
            Store.dag_id,
            Store.run_id,
            Store.task_id,
            Store.map_index,
            Store.key,
            Store.value,
            TaskInstance.state,
            TaskInstance.next_method,
            TaskInstance.try_number,
            TaskInstance.trigger_id,
        )
        .join(
            TaskInstance,
            and_(
                TaskInstance.dag_id == Store.dag_id,
                TaskInstance.run_id == Store.run_id,
                TaskInstance.task_id == Store.task_id,
                TaskInstance.map_index == Store.map_index,
            ),
        )
        .where(
            Store.key.in_((TRIES_KEY, CURRENT_KEY)),
            Store.dag_id.in_(sorted(dag_ids)),
            or_(TaskInstance.state.in_(UNFINISHED_STATES), Store.updated_at >= since),
        )
        .order_by(Store.updated_at.desc())
        .limit(limit * 2)
    )
    rows: dict[tuple[str, str, str, int], GangTaskRow] = {}
    with create_session() as session:
        for row in session.execute(query):
            key = (row.dag_id, row.run_id, row.task_id, row.map_index)
            if key not in rows:
                if len(rows) >= limit:
                    continue
                state = None if row.state is None else str(getattr(row.state, "value", row.state))
                rows[key] = GangTaskRow(
                    *key,
                    state,
                    row.next_method,
                    row.try_number,
                    row.trigger_id,  # type: ignore[arg-type]
                )
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
                None if ti.state is None else str(getattr(ti.state, "value", ti.state)),
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

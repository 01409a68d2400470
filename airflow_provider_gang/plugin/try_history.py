"""The try history behind the Gang view and the Gangs page, wherever this Airflow keeps it.

With a task state store (Airflow 3.3 and later) the history is read from the metadata database
(:mod:`.queries`, :mod:`.overview_queries`); without one (3.1, 3.2) from the history ConfigMaps on
the cluster (:mod:`.history_places` says where, :mod:`.history_maps` reads them). Either way the
pages get the same values - the JSON texts of ``gang.tries`` and ``gang.current`` - so they show the
same thing; on 3.1 and 3.2 they also get, per task instance, why its history could not be read
when the cluster did not answer (``None``: read).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection

from airflow_provider_gang.plugin import history_maps, history_places, overview_queries, queries
from airflow_provider_gang.plugin.history_places import Key
from airflow_provider_gang.plugin.overview_queries import GangTaskRow
from airflow_provider_gang.plugin.queries import StoredTaskState
from airflow_provider_gang.sweep.airflow_state import has_task_state_store


def read_task_history(
    dag_id: str, run_id: str, task_id: str, map_index: int = -1
) -> tuple[StoredTaskState, str | None]:
    """One task instance's history and why it could not be read (``None``: read). No task instance,
    no history."""
    if has_task_state_store():
        return queries.read_task_state(dag_id, run_id, task_id, map_index), None
    key = (dag_id, run_id, task_id, map_index)
    place = history_places.read_places([key]).get(key)
    if place is None:
        return StoredTaskState(), None
    answer = history_maps.read_history(key, place)
    return queries.stored_task_state(answer.stored), answer.unread


def read_gang_rows(
    dag_ids: Collection[str], *, now: datetime.datetime, recent_seconds: float, limit: int
) -> tuple[list[GangTaskRow], dict[Key, str]]:
    """The Gangs page's rows (``overview_queries.read_gang_tasks``' contract) and, by task key, why a
    row's history could not be read. Without a task state store: the gang task instances of
    ``overview_queries.read_gang_task_instances`` with their histories, one LIST per (cluster,
    namespace); as on 3.3, a task instance with no history is not listed - unless its history could
    not be read, when the row shows what the database has and says so."""
    if has_task_state_store():
        return overview_queries.read_gang_tasks(dag_ids, now=now, recent_seconds=recent_seconds, limit=limit), {}
    rows = overview_queries.read_gang_task_instances(dag_ids, now=now, recent_seconds=recent_seconds, limit=limit)
    places = history_places.read_places([key_of(row) for row in rows])
    answers = history_maps.read_histories(places)
    filled, unread = [], {}
    for row in rows:
        answer = answers.get(key_of(row))
        if answer is None:
            continue
        if answer.unread is not None:
            unread[key_of(row)] = answer.unread
        elif not answer.stored:
            continue
        filled.append(dataclasses.replace(row, stored=dict(answer.stored)))
    return filled, unread


def key_of(row: GangTaskRow) -> Key:
    return (row.dag_id, row.run_id, row.task_id, row.map_index)

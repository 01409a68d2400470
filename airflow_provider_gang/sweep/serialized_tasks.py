"""What Airflow keeps of a gang task itself: its ``kubernetes_conn_id`` and ``namespace`` arguments in
the serialized DAG of the DAG version a task instance ran (``TaskInstance.dag_version_id`` ->
``serialized_dag``; ``GangTrainingOperator.get_serialized_fields`` adds the connection id).

Read where the task object is not at hand: the pages (``plugin.try_history``) and the listener,
which the api-server calls with the task instances ``DAG.set_task_instance_state`` returned - ORM rows
without their ``task`` (``airflow/api_fastapi/core_api/services/public/task_instances.py``). A DAG
version is immutable, so its answer is cached per version id. Airflow leaves a value equal to the
argument's default out of the serialized task (``_is_excluded`` in
``airflow/serialization/serialized_objects.py``), so a missing one is the default. Airflow's models are
imported inside the functions, as in ``sweep.airflow_state``.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Collection, Mapping
from typing import Any

SERIALIZED_TASKS_CACHE_SIZE = 256
"""How many DAG versions keep their gang tasks' (connection id, namespace) between calls."""
TASK_FIELDS = ("kubernetes_conn_id", "namespace")


def gang_tasks_of(data: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The serialized tasks of a serialized DAG (``SerializedDagModel.data``: ``dag.tasks``, each
    ``{"__type": ..., "__var": {fields}}``, as Airflow reads them itself in
    ``airflow/serialization/serialized_objects.py``), by task id: their :data:`TASK_FIELDS`. A DAG
    that does not read gives none. Pure."""
    dag = (data or {}).get("dag")
    tasks = dag.get("tasks") if isinstance(dag, dict) else None
    found: dict[str, dict[str, Any]] = {}
    for task in tasks if isinstance(tasks, list) else []:
        fields = task.get("__var", task) if isinstance(task, dict) else None
        if isinstance(fields, dict) and isinstance(fields.get("task_id"), str):
            found[fields["task_id"]] = {name: fields.get(name) for name in TASK_FIELDS}
    return found


@functools.lru_cache(maxsize=SERIALIZED_TASKS_CACHE_SIZE)
def _tasks_of_version(version_id: str) -> dict[str, dict[str, Any]]:
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(SerializedDagModel).where(SerializedDagModel.dag_version_id == uuid.UUID(version_id))
        row = session.scalars(query).first()
        return {} if row is None else gang_tasks_of(row.data)


def serialized_tasks(version_ids: Collection[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """The tasks' fields (:func:`gang_tasks_of`) of each DAG version, by version id."""
    return {version: _tasks_of_version(version) for version in sorted(set(version_ids))}


def task_fields(dag_version_id: Any, task_id: str) -> dict[str, Any]:
    """The serialized :data:`TASK_FIELDS` of ``task_id`` in the DAG version ``dag_version_id``
    (empty: no version recorded, or no such task)."""
    if dag_version_id is None:
        return {}
    return _tasks_of_version(str(dag_version_id)).get(task_id, {})

"""Where a gang task instance's try history is kept, as the metadata database tells it.

On Airflow 3.3 and later the history is in Airflow's task state store (``task_state_store`` table,
read by :mod:`.queries`); on 3.1 and 3.2 it is one ConfigMap per task instance on the cluster
(``operators.try_store.ClusterTryStore``). ``sweep.airflow_state.has_task_state_store`` tells which, by feature
detection - whether Airflow has the model - never by parsing Airflow's version, as
``operators.try_store.store_for`` decides on the task's side.

A history ConfigMap is named by ``operators.try_store.history_name`` of the task instance's key, in
the namespace ``operators.try_run.TryRun`` hands ``store_for``: the operator's rendered
``namespace`` argument, on the cluster of the operator's ``kubernetes_conn_id``. The plugin learns
both from what Airflow keeps of the task itself, not from what a try wrote:

- ``kubernetes_conn_id`` from the serialized task of the DAG version the task instance ran
  (``TaskInstance.dag_version_id`` -> ``serialized_dag``; ``GangTrainingOperator.get_serialized_fields``
  adds it). A version is immutable, so its answer is cached per version id;
- ``namespace`` from the task instance's rendered template fields (``rendered_task_instance_fields``,
  written when a try starts, before ``execute``), else from the serialized task when it is not a
  template. Airflow leaves a value equal to the argument's default out of the serialized task
  (``_is_excluded`` in ``airflow/serialization/serialized_objects.py``), so a missing one is the
  default (``kubernetes_default``, ``default``).

Not the reservation XCom (``links.RESERVATION_XCOM_KEY``), although it holds a connection id and a
namespace: those are the try's gang's, which a fallback step may move to another cluster or namespace
(``reservation.fallback.OtherCluster``), and Airflow 3 deletes a task instance's XComs when a try
starts, while that try pushes its XCom only once its reservation is created - a try that failed
before that (a refused precheck, an invalid argument) leaves none, yet has a record to show.

Values are returned as stored; Airflow's models are imported inside the functions, as in
:mod:`.queries`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.operators.try_store import history_name
from airflow_provider_gang.reservation.tries import argument_record
from airflow_provider_gang.sweep.serialized_tasks import serialized_tasks

Key = tuple[str, str, str, int]
DEFAULT_CONN_ID = argument_record.default("kubernetes_conn_id")
"""``GangTrainingOperator``'s default ``kubernetes_conn_id``."""
DEFAULT_NAMESPACE = argument_record.default("namespace")
"""``GangTrainingOperator``'s default ``namespace``."""
HISTORY_CLIENT_OPTIONS = {"request_timeout": 4.0, "retry_attempts": 2, "retry_base_delay": 0.2, "retry_max_delay": 0.5}
"""How the pages read history ConfigMaps (``kube.options.ClientOptions``): a failing call is reported
within ``live.LIVE_READ_TIMEOUT_SECONDS`` with its own error, not as that timeout (the operator's
``client_options`` are not serialized with the task)."""


@dataclass(frozen=True)
class HistoryPlace:
    """Where one task instance's history ConfigMap is: ``name`` in ``namespace`` of the cluster of
    ``kubernetes_conn_id`` (``connection`` is always ``None``: a ``live.ClusterPlace``)."""

    kubernetes_conn_id: str
    namespace: str
    name: str
    connection: dict[str, Any] | None = None
    client_options: dict[str, Any] = field(default_factory=lambda: dict(HISTORY_CLIENT_OPTIONS))


def is_template(value: Any) -> bool:
    """Whether a serialized argument is a Jinja template, rendered only when a try runs."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def place_of(key: Key, serialized: Mapping[str, Any] | None, rendered: Mapping[str, Any] | None) -> HistoryPlace:
    """The history ConfigMap of the task instance ``key`` from its serialized task's fields and its
    rendered template fields (either ``None``: not stored). Pure."""
    serialized, rendered = serialized or {}, rendered or {}
    conn_id = serialized.get("kubernetes_conn_id")
    namespace = rendered.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        namespace = serialized.get("namespace")
        if not isinstance(namespace, str) or not namespace or is_template(namespace):
            namespace = DEFAULT_NAMESPACE
    return HistoryPlace(
        kubernetes_conn_id=conn_id if isinstance(conn_id, str) and conn_id else DEFAULT_CONN_ID,
        namespace=namespace,
        name=history_name(*key),
    )


def read_places(keys: Collection[Key]) -> dict[Key, HistoryPlace]:
    """The history ConfigMap of each task instance of ``keys`` (see the module docstring): one query
    for the task instances with their rendered fields, one per DAG version not yet cached."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import and_, select

    if not keys:
        return {}
    wanted = set(keys)
    query = (
        select(
            TaskInstance.dag_id,
            TaskInstance.run_id,
            TaskInstance.task_id,
            TaskInstance.map_index,
            TaskInstance.dag_version_id,
            Rendered.rendered_fields,
        )
        .outerjoin(
            Rendered,
            and_(
                Rendered.dag_id == TaskInstance.dag_id,
                Rendered.run_id == TaskInstance.run_id,
                Rendered.task_id == TaskInstance.task_id,
                Rendered.map_index == TaskInstance.map_index,
            ),
        )
        .where(
            TaskInstance.dag_id.in_(sorted({key[0] for key in wanted})),
            TaskInstance.run_id.in_(sorted({key[1] for key in wanted})),
            TaskInstance.task_id.in_(sorted({key[2] for key in wanted})),
        )
    )
    with create_session() as session:
        rows = [row for row in session.execute(query) if (row.dag_id, row.run_id, row.task_id, row.map_index) in wanted]
    tasks = serialized_tasks([str(row.dag_version_id) for row in rows if row.dag_version_id is not None])
    places = {}
    for row in rows:
        key = (row.dag_id, row.run_id, row.task_id, row.map_index)
        serialized = tasks.get(str(row.dag_version_id), {}).get(row.task_id)
        rendered = row.rendered_fields if isinstance(row.rendered_fields, dict) else None
        places[key] = place_of(key, serialized, rendered)
    return places

"""The try history behind the Gang view and the Gangs page, wherever this Airflow keeps it.

With a task state store (Airflow 3.3 and later) the history is read from the metadata database
(:mod:`.stored_records`); without one (3.1, 3.2) from the try history ConfigMaps on the cluster
(``operators.try_history.ClusterTryStore`` writes them). Either way the pages get the same values -
the JSON texts of ``gang.tries`` and ``gang.current`` - so they show the same thing; on 3.1 and 3.2
they also get, per task instance, why its history could not be read when the cluster did not answer
(``None``: read).

**Where a ConfigMap is.** ``sweep.airflow_state.has_task_state_store`` tells which store, by feature
detection - whether Airflow has the model - never by parsing Airflow's version, as
``operators.try_history.store_for`` decides on the task's side. A history ConfigMap is named by
``reservation.naming.try_history_name`` of the task instance's key, in the namespace
``operators.try_run.TryRun`` hands ``store_for``: the operator's rendered ``namespace`` argument, on
the cluster of the operator's ``kubernetes_conn_id``. The plugin learns both from what Airflow keeps
of the task itself, not from what a try wrote (:func:`read_places`):

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

**Reading the ConfigMaps** (``data`` holds the task state keys, each value the JSON text the task
state store would hold) goes through ``live.read_grouped``, the machinery of the live conditions, so
the rules are theirs: one read per (cluster, namespace) group, every group concurrently, all within
``live.LIVE_READ_TIMEOUT_SECONDS``; a group that fails says why on each of its task instances, and the
page shows what the database has. :func:`read_histories` (the Gangs page) is one LIST per group,
selected by the history role label (``airflow-gang.io/role=try-history``), matched back to task
instances by ConfigMap name; :func:`read_history` (the Gang view) one GET. A history that does not
exist (the try has not written one yet, or it expired: ``operators.try_history.RETENTION``) is an
empty history, not a failure. Airflow's models are imported inside the functions, as in
:mod:`.stored_records`.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CONFIG_MAPS
from airflow_provider_gang.plugin import stored_records
from airflow_provider_gang.plugin.live import read_grouped
from airflow_provider_gang.plugin.stored_records import GangTaskRow, StoredTaskState, TaskKey, of_task_instance
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY
from airflow_provider_gang.reservation.tries import argument_record
from airflow_provider_gang.sweep.airflow_state import has_task_state_store
from airflow_provider_gang.sweep.serialized_tasks import serialized_tasks

log = logging.getLogger(__name__)


def read_task_history(
    dag_id: str, run_id: str, task_id: str, map_index: int = -1
) -> tuple[StoredTaskState, str | None]:
    """One task instance's history and why it could not be read (``None``: read). No task instance,
    no history."""
    if has_task_state_store():
        return stored_records.read_task_state(dag_id, run_id, task_id, map_index), None
    key = (dag_id, run_id, task_id, map_index)
    place = read_places([key]).get(key)
    if place is None:
        return StoredTaskState(), None
    answer = read_history(key, place)
    return stored_records.stored_task_state(answer.stored), answer.unread


def read_gang_rows(
    dag_ids: Collection[str], *, now: datetime.datetime, recent_seconds: float, limit: int
) -> tuple[list[GangTaskRow], dict[TaskKey, str]]:
    """The Gangs page's rows (``stored_records.read_gang_tasks``' contract) and, by task key, why a
    row's history could not be read. Without a task state store: the gang task instances of
    ``stored_records.read_gang_task_instances`` with their histories, one LIST per (cluster,
    namespace); as on 3.3, a task instance with no history is not listed - unless its history could
    not be read, when the row shows what the database has and says so."""
    if has_task_state_store():
        return stored_records.read_gang_tasks(dag_ids, now=now, recent_seconds=recent_seconds, limit=limit), {}
    rows = stored_records.read_gang_task_instances(dag_ids, now=now, recent_seconds=recent_seconds, limit=limit)
    places = read_places([row.key for row in rows])
    answers = read_histories(places)
    filled, unread = [], {}
    for row in rows:
        answer = answers.get(row.key)
        if answer is None:
            continue
        if answer.unread is not None:
            unread[row.key] = answer.unread
        elif not answer.stored:
            continue
        filled.append(dataclasses.replace(row, stored=dict(answer.stored)))
    return filled, unread


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


def place_of(key: TaskKey, serialized: Mapping[str, Any] | None, rendered: Mapping[str, Any] | None) -> HistoryPlace:
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
        name=naming.try_history_name(*key),
    )


def read_places(keys: Collection[TaskKey]) -> dict[TaskKey, HistoryPlace]:
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
                *of_task_instance(
                    Rendered, (TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index)
                )
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


HISTORY_SELECTOR = f"{naming.ROLE_LABEL}={naming.TRY_HISTORY_ROLE}"
"""The label selector of every history ConfigMap (``ClusterTryStore`` sets it at creation)."""


@dataclass(frozen=True)
class HistoryRead:
    """What the cluster said of one task instance's history: ``stored`` maps the task state keys
    found to their JSON texts (as the ``task_state_store`` table's ``value``); ``unread`` is why it
    could not be read (``None``: read, possibly empty)."""

    stored: dict[str, str] = field(default_factory=dict)
    unread: str | None = None


def unread(reason: str) -> HistoryRead:
    return HistoryRead(unread=f"the try history could not be read from the cluster: {reason}")


def stored_texts(config_map: Mapping[str, Any] | None) -> dict[str, str]:
    """The task state keys of a history ConfigMap's ``data`` whose values are texts; another value
    (a ConfigMap written by hand) is logged and left out."""
    data = (config_map or {}).get("data") or {}
    found = {}
    for key in (TRIES_KEY, CURRENT_KEY):
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, str):
            found[key] = value
        elif value is not None:
            name = ((config_map or {}).get("metadata") or {}).get("name")
            log.warning("History ConfigMap %s: %s is not a text, left out: %r", name, key, value)
    return found


def keep_history(item: dict[str, Any]) -> dict[str, Any]:
    """What a LIST keeps of each ConfigMap: its name and data (``KubeClient.list``'s ``transform``)."""
    return {"metadata": {"name": (item.get("metadata") or {}).get("name")}, "data": item.get("data")}


async def list_group(
    client: KubeClient, namespace: str, places: Mapping[TaskKey, HistoryPlace]
) -> dict[TaskKey, HistoryRead]:
    """One LIST of the namespace's history ConfigMaps, matched to ``places`` by name."""
    found, _ = await client.list(CONFIG_MAPS, namespace, label_selector=HISTORY_SELECTOR, transform=keep_history)
    by_name = {item["metadata"]["name"]: item for item in found}
    return {key: HistoryRead(stored_texts(by_name.get(place.name))) for key, place in places.items()}


async def get_group(
    client: KubeClient, namespace: str, places: Mapping[TaskKey, HistoryPlace]
) -> dict[TaskKey, HistoryRead]:
    """One GET per ConfigMap of ``places`` (the Gang view passes one)."""
    answers = {}
    for key, place in places.items():
        try:
            answers[key] = HistoryRead(stored_texts(await client.get(CONFIG_MAPS, place.name, namespace)))
        except errors.NotFound:
            answers[key] = HistoryRead()
    return answers


def read_histories(places: Mapping[TaskKey, HistoryPlace]) -> dict[TaskKey, HistoryRead]:
    """The history of every task instance of ``places``: one LIST per (cluster, namespace)."""
    return read_grouped(places, list_group, unread)


def read_history(key: TaskKey, place: HistoryPlace) -> HistoryRead:
    """The history of one task instance: one GET."""
    return read_grouped({key: place}, get_group, unread)[key]

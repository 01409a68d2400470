"""The plugin's FastAPI app: the Gang page and the JSON behind it, for one task instance each, and
the cluster-wide Gangs page.

Every route requires an Airflow user (``GetUserDep``: the UI's ``_token`` cookie or a Bearer token),
because plugin apps get no authentication by default, and shows only DAGs the user may read: a task
instance's routes check its DAG with Airflow's own dependency (``requires_access_dag("GET",
TASK_INSTANCE)``, which reads ``dag_id`` from the query, ``airflow/api_fastapi/core_api/security.py``;
403 otherwise), the Gangs page lists only the DAGs of the auth manager's ``get_authorized_dag_ids`` (asked
directly: Airflow's ``ReadableDagsFilterDep`` reads ``app.state.auth_manager``, which only the
core apps have, not a plugin's). A task instance is named by ``dag_id``,
``run_id``, ``task_id`` and ``map_index`` (:func:`parse_map_index`). The page reads the database
(:mod:`.stored_records`; the try history where this Airflow keeps it, :mod:`.try_history`), and while
the task instance is unfinished the cluster too (:mod:`.live`), then builds the page model
(:mod:`.gang_view`, :mod:`.gangs_page`) and renders it (:mod:`.rendering`).

The modules behind the routes are imported inside them: this module is imported wherever plugins
load (scheduler, workers, triggerer), and they import the provider's operators and triggers and,
through ``hooks.gang``, the Kubernetes client - about a second of imports. The api-server, the one
process that serves the routes, loads them and compiles the templates when it starts instead
(:func:`load_pages`, the app's lifespan: Airflow's own lifespan enters the lifespan of every mounted
FastAPI app, ``airflow/api_fastapi/app.py``), so that its first request costs what a later one does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse


def load_pages() -> None:
    """Import every module the routes use and compile the pages' templates (``rendering``)."""
    from airflow_provider_gang.plugin import (  # noqa: F401 - imported to be loaded
        gang_view,
        gangs_page,
        live,
        rendering,
        stored_records,
        try_history,
    )

    rendering.compile_templates()


@contextlib.asynccontextmanager
async def load_pages_at_start(app: FastAPI) -> AsyncIterator[None]:
    """The app's lifespan: :func:`load_pages` in a thread before the first request."""
    await asyncio.to_thread(load_pages)
    yield


gang_app = FastAPI(title="Gang reservations", lifespan=load_pages_at_start)
READ_TASK_INSTANCE = [Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))]
OVERVIEW_RECENT_SECONDS = 7 * 24 * 3600.0
"""Finished gangs the Gangs page lists: those whose records changed in the last week."""
OVERVIEW_LIMIT = 2000
"""Most task instances the Gangs page lists (the newest; unfinished ones first come by recency too)."""

UNSUBSTITUTED_MAP_INDEX = "{MAP_INDEX}"
"""What the "Gang" tab sends for a task that is not mapped: the Airflow 3.3.2 UI replaces
``{MAP_INDEX}`` in an external view's ``href`` only when the page's route has a map index, which
``/dags/<dag>/runs/<run>/tasks/<task>`` has not (``ui/dist/assets/index-*.js``, seen in a browser)."""


def parse_map_index(value: str) -> int:
    """The map index a request names: an integer, or -1 for an empty or unsubstituted placeholder."""
    if value in ("", UNSUBSTITUTED_MAP_INDEX):
        return -1
    try:
        return int(value)
    except ValueError:
        raise HTTPException(status_code=422, detail=f"map_index must be an integer, got {value!r}") from None


@gang_app.get("/api/reservation", dependencies=READ_TASK_INSTANCE)
def reservation_api(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str = "-1") -> dict[str, Any]:
    """The stored values the page is built from: the XComs (``reservation``, ``summary``; each only
    if it exists), ``task_instance`` (``stored_records.TaskInstanceRow``) and ``task_state``
    (``stored_records.StoredTaskState``, from wherever this Airflow keeps it: ``try_history``), with
    ``task_state_unread`` saying why when it could not be read from the cluster."""
    from airflow_provider_gang.plugin import stored_records, try_history

    index = parse_map_index(map_index)
    task_state, unread = try_history.read_task_history(dag_id, run_id, task_id, index)
    return {
        **stored_records.read_gang_xcoms(dag_id, run_id, task_id, index),
        "task_instance": stored_records.read_task_instance(dag_id, run_id, task_id, index).to_dict(),
        "task_state": task_state.to_dict(),
        **({"task_state_unread": unread} if unread is not None else {}),
    }


@gang_app.get("/ui/reservation", response_class=HTMLResponse, dependencies=READ_TASK_INSTANCE)
def reservation_page(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str = "-1") -> str:
    """The page the extra link and the task-instance tab open."""
    import time

    from airflow_provider_gang.plugin import gang_view, live, rendering, stored_records, try_history

    index = parse_map_index(map_index)
    task_instance = stored_records.read_task_instance(dag_id, run_id, task_id, index)
    conditions, pods = None, None
    task_state, unread = try_history.read_task_history(dag_id, run_id, task_id, index)
    if not gang_view.is_finished(task_instance):  # deferred: a trigger row
        try:
            watched = stored_records.watched_reservation(stored_records.read_trigger(dag_id, run_id, task_id, index))
        except ValueError as error:
            conditions = live.describe_failure(error)
        else:
            conditions = live.read_live_conditions(watched)
            current = stored_records.read_current(task_state.current)
            if current is not None and current.launched_at is not None:
                pods = live.read_live_pods(watched, current.plan.gang)
    page = gang_view.build_page(
        dag_id,
        run_id,
        task_id,
        stored_records.read_gang_xcoms(dag_id, run_id, task_id, index),
        task_instance,
        task_state,
        now=time.time(),
        conditions=conditions,
        pods=pods,
        map_index=index,
        past_tries=stored_records.read_past_try_numbers(dag_id, run_id, task_id, index),
        history_unread=unread,
    )
    return rendering.render_page(page)


@gang_app.get("/ui/gangs", response_class=HTMLResponse)
def gangs_page(user: GetUserDep, state: str = "", dag_id: str = "") -> str:
    """Every gang of the DAGs the user may read: waiting and running ones, and those of recent runs
    (:mod:`.gangs_page`). Two database queries and, for the deferred gangs, one LIST per kind per
    cluster and namespace (:func:`.live.read_conditions_by_task`); on Airflow 3.1 and 3.2 also one LIST of history
    ConfigMaps per cluster and namespace (:mod:`.try_history`)."""
    import datetime
    import time

    from airflow.api_fastapi.app import get_auth_manager

    from airflow_provider_gang.plugin import gangs_page, live, rendering, stored_records, try_history

    if state and state not in gangs_page.PHASES:
        raise HTTPException(
            status_code=422, detail=f"state must be one of {', '.join(gangs_page.PHASES)}, got {state!r}"
        )
    now = time.time()
    rows, unread = try_history.read_gang_rows(
        get_auth_manager().get_authorized_dag_ids(user=user, method="GET"),
        now=datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc),
        recent_seconds=OVERVIEW_RECENT_SECONDS,
        limit=OVERVIEW_LIMIT,
    )
    deferred = {row.key: row.trigger_id for row in rows if row.state == "deferred" and row.trigger_id}
    triggers = stored_records.read_triggers(list(deferred.values()))
    watched = {}
    for key, trigger_id in deferred.items():
        found = triggers.get(trigger_id)
        try:
            gang = None if found is None else stored_records.watched_reservation(stored_records.TriggerRow(*found))
        except ValueError:
            continue
        if gang is not None:
            watched[key] = gang
    conditions = live.read_conditions_by_task(watched)
    page = gangs_page.build_overview(
        rows, now=now, conditions=conditions, phase_filter=state, dag_filter=dag_id, unread=unread
    )
    return rendering.render_overview(page)

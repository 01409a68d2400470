"""The plugin's FastAPI app: the Gang page and the JSON behind it, for one task instance each.

Both routes require an Airflow user (``GetUserDep``: the UI's ``_token`` cookie or a Bearer token),
because plugin apps get no authentication by default. A task instance is named by ``dag_id``,
``run_id``, ``task_id`` and ``map_index`` (:func:`parse_map_index`). The page reads the database
(:mod:`.queries`), and while the task instance is unfinished the cluster too (:mod:`.live`), then
builds the page model (:mod:`.page_model`) and renders it (:mod:`.rendering`).

The modules behind the routes are imported inside them: this module is imported wherever plugins
load, and they import the provider's operators and triggers.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse

gang_app = FastAPI(title="Gang reservations")

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


@gang_app.get("/api/reservation")
def reservation_api(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str = "-1") -> dict[str, Any]:
    """The stored values the page is built from: the XComs (``reservation``, ``summary``; each only
    if it exists), ``task_instance`` (``queries.TaskInstanceRow``) and ``task_state``
    (``queries.StoredTaskState``)."""
    from airflow_provider_gang.plugin import queries

    index = parse_map_index(map_index)
    return {
        **queries.read_gang_xcoms(dag_id, run_id, task_id, index),
        "task_instance": queries.read_task_instance(dag_id, run_id, task_id, index).to_dict(),
        "task_state": queries.read_task_state(dag_id, run_id, task_id, index).to_dict(),
    }


@gang_app.get("/ui/reservation", response_class=HTMLResponse)
def reservation_page(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str = "-1") -> str:
    """The page the extra link and the task-instance tab open."""
    import time

    from airflow_provider_gang.plugin import live, page_model, queries, rendering

    index = parse_map_index(map_index)
    task_instance = queries.read_task_instance(dag_id, run_id, task_id, index)
    conditions = None
    if not page_model.is_finished(task_instance):  # deferred: a trigger row
        try:
            watched = page_model.watched_reservation(queries.read_trigger(dag_id, run_id, task_id, index))
        except ValueError as error:
            conditions = live.describe_failure(error)
        else:
            conditions = live.read_live_conditions(watched)
    page = page_model.build_page(
        dag_id,
        run_id,
        task_id,
        queries.read_gang_xcoms(dag_id, run_id, task_id, index),
        task_instance,
        queries.read_task_state(dag_id, run_id, task_id, index),
        now=time.time(),
        conditions=conditions,
    )
    return rendering.render_page(page)

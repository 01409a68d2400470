"""Airflow UI plugin: a reservation page per gang task instance, and a small JSON API behind it.

Registered through the ``airflow.plugins`` entry point in ``pyproject.toml``, which Airflow always
loads (the provider-info ``plugins`` key only loads with ``lazy_discover_providers=False``,
airflow-3.3-notes section 3). The FastAPI app is mounted at ``/gang`` on the api-server; routes
require an Airflow user (``GetUserDep``: the UI's ``_token`` cookie or a Bearer token), because
plugin apps get no authentication by default.

What it shows comes from the task's XComs (``links.RESERVATION_XCOM_KEY`` while the gang is waiting
or running, the summary ``return_value`` when it succeeded), read through Airflow's XCom model in
the api-server process. Heavy imports happen inside the routes: plugin modules are imported
wherever plugins load.
"""

from __future__ import annotations

import html
from typing import Any

from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from airflow_provider_gang.links import PLUGIN_URL_PREFIX, RESERVATION_XCOM_KEY, SUMMARY_XCOM_KEY

gang_app = FastAPI(title="Gang reservations")


def read_gang_xcoms(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
    """The reservation and summary XComs of one task instance (missing keys are left out)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    found: dict[str, Any] = {}
    with create_session() as session:
        for key in (RESERVATION_XCOM_KEY, SUMMARY_XCOM_KEY):
            query = XComModel.get_many(
                run_id=run_id, key=key, task_ids=task_id, dag_ids=dag_id, map_indexes=map_index, limit=1
            )
            row = session.scalars(query).first()
            if row is not None:
                found["summary" if key == SUMMARY_XCOM_KEY else "reservation"] = XComModel.deserialize_value(row)
    return found


def render_page(dag_id: str, run_id: str, task_id: str, xcoms: dict[str, Any]) -> str:
    """HTML for the reservation page; every value is escaped."""

    def table(title: str, values: dict[str, Any]) -> str:
        rows = "".join(
            f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(str(value))}</td></tr>"
            for key, value in values.items()
            if not isinstance(value, (dict, list))
        )
        return f"<h2>{html.escape(title)}</h2><table>{rows}</table>"

    parts = [f"<h1>Gang of {html.escape(task_id)}</h1><p>{html.escape(dag_id)} / {html.escape(run_id)}</p>"]
    if not xcoms:
        parts.append("<p>No reservation recorded yet for this task instance.</p>")
    if isinstance(xcoms.get("reservation"), dict):
        parts.append(table("Reservation", xcoms["reservation"]))
    summary = xcoms.get("summary")
    if isinstance(summary, dict):
        parts.append(table("Result", summary))
        tries = summary.get("tries") or []
        items = "".join(
            f"<li>try {html.escape(str(item.get('attempt')))}: {html.escape(str(item.get('step')))} -> "
            f"{html.escape(str(item.get('outcome')))}</li>"
            for item in tries
            if isinstance(item, dict)
        )
        parts.append(f"<h2>Tries</h2><ol>{items}</ol>")
    return "<!doctype html><html><body>" + "".join(parts) + "</body></html>"


@gang_app.get("/api/reservation")
def reservation_api(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
    """JSON of what :func:`read_gang_xcoms` finds."""
    return read_gang_xcoms(dag_id, run_id, task_id, map_index)


@gang_app.get("/ui/reservation", response_class=HTMLResponse)
def reservation_page(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The page the extra link and the task-instance tab open."""
    return render_page(dag_id, run_id, task_id, read_gang_xcoms(dag_id, run_id, task_id, map_index))


class GangPlugin(AirflowPlugin):
    """Mounts the reservation pages and adds a "Gang" tab on every task instance page."""

    name = "gang"
    fastapi_apps = [{"app": gang_app, "url_prefix": PLUGIN_URL_PREFIX, "name": "Gang reservations"}]
    external_views = [
        {
            "name": "Gang",
            "href": "gang/ui/reservation?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}",
            "destination": "task_instance",
            "url_route": "gang-reservation",
        }
    ]

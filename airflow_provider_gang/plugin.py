"""Airflow UI plugin: a reservation page per gang task instance, and a small JSON API behind it.

Registered through the ``airflow.plugins`` entry point in ``pyproject.toml``, which Airflow always
loads (the provider-info ``plugins`` key only loads with ``lazy_discover_providers=False``,
``LAZY_LOAD_PROVIDERS`` in apache/airflow ``airflow-core/src/airflow/settings.py``). The FastAPI app
is mounted at ``/gang`` on the api-server; routes require an Airflow user (``GetUserDep``: the UI's
``_token`` cookie or a Bearer token), because plugin apps get no authentication by default.

The same page is reached two ways: the "Gang reservation" extra link (:mod:`airflow_provider_gang.links`)
and the "Gang" tab that the external view adds to every task instance page, where the UI shows it
in an iframe. What it shows comes from the metadata database, read in the api-server process:

- the task instance's state and ``next_method``, which tell a gang waiting for capacity
  (deferred to ``execute_reserved``) from one that runs (deferred to ``execute_finished``);
- the task's XComs: ``links.RESERVATION_XCOM_KEY`` as soon as a try chose its reservation, the
  summary ``return_value`` once the gang succeeded (per-rank exit codes, GPU-hours of this try and
  of all tries, every try's step and outcome);
- the task state store (:func:`read_task_state`), which ``operators.lifecycle`` writes and which,
  unlike XComs, survives retries: ``gang.tries`` gives every finished try's step, outcome (a
  ``reservation.phases.Reason`` value) and message - so a failed task says why each try failed -
  and ``gang.current`` the try in progress: what it waits for and since when.

While a try is deferred the page also shows the conditions its reservation waits on, read live
from the cluster (:func:`read_live_conditions`): the task instance's ``trigger`` row names the
trigger and the objects it watches and its ``kubernetes_conn_id``, which the api-server resolves
as the triggerer would (one GET or LIST, at most :data:`LIVE_READ_TIMEOUT_SECONDS`). The task log
has their history (``triggers.progress`` logs every change and a heartbeat).

Heavy imports happen inside the routes: plugin modules are imported wherever plugins load.
"""

from __future__ import annotations

import html
import json
import time
from typing import Any

from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from airflow_provider_gang.links import PLUGIN_URL_PREFIX, RESERVATION_XCOM_KEY, SUMMARY_XCOM_KEY
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.records.reading import RecordError

gang_app = FastAPI(title="Gang reservations")

UNSUBSTITUTED_MAP_INDEX = "{MAP_INDEX}"
"""What the "Gang" tab sends for a task that is not mapped: the Airflow 3.3.2 UI replaces
``{MAP_INDEX}`` in an external view's ``href`` only when the page's route has a map index, which
``/dags/<dag>/runs/<run>/tasks/<task>`` has not (``ui/dist/assets/index-*.js``, seen in a browser)."""

RESUME_METHODS = {
    "execute_reserved": "Waiting for capacity: the reservation is requested, the task is deferred until it is granted",
    "execute_finished": "Running: the gang is launched and watched as one until it ends",
}
"""``GangTrainingOperator`` methods a deferred try resumes in, and what waiting for each one means."""

STATE_TEXT = {
    "success": "Succeeded",
    "failed": "Failed",
    "up_for_retry": "Failed; waiting for the next try",
    "running": "Running on a worker (preparing the reservation or launching the members)",
    "queued": "Queued for a worker",
    "scheduled": "Scheduled",
}


def parse_map_index(value: str) -> int:
    """The map index a request names: an integer, or -1 for an empty or unsubstituted placeholder."""
    if value in ("", UNSUBSTITUTED_MAP_INDEX):
        return -1
    try:
        return int(value)
    except ValueError:
        raise HTTPException(status_code=422, detail=f"map_index must be an integer, got {value!r}") from None


FINISHED_STATES = task_state.FINAL_TASK_STATES
"""Task instance states after which the page stops refreshing itself."""

REFRESH_SECONDS = 10
"""How often the page of an unfinished gang reloads itself: the UI does not reload a tab's iframe
when it refreshes the task instance around it (seen in a browser: the shell said Success while the
tab still said Running)."""


def describe_state(state: str | None, next_method: str | None, *, exists: bool = True) -> str:
    """One line for a person: where the gang of a task instance is, from its state and resume method."""
    if not exists:
        return "No such task instance"
    if state is None:
        return "Not scheduled yet"
    if state == "deferred":
        return RESUME_METHODS.get(next_method or "", f"Deferred (resumes in {next_method})")
    return STATE_TEXT.get(state, state.replace("_", " ").capitalize())


def read_task_instance(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
    """``exists``, ``state``, ``next_method`` and ``try_number`` of one task instance.

    A task instance the scheduler created but has not scheduled yet exists with ``state`` ``None``."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(TaskInstance.state, TaskInstance.next_method, TaskInstance.try_number).where(
        TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == task_id,
        TaskInstance.map_index == map_index,
    )
    with create_session() as session:
        row = session.execute(query).first()
    if row is None:
        return {"exists": False, "state": None, "next_method": None, "try_number": None}
    state = None if row.state is None else str(getattr(row.state, "value", row.state))
    return {"exists": True, "state": state, "next_method": row.next_method, "try_number": row.try_number}


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


TRIES_KEY = task_state.TRIES_KEY
CURRENT_KEY = task_state.CURRENT_KEY
"""Task state store keys written by ``operators.lifecycle`` (``reservation.records.task_state``)."""


def read_task_state(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
    """``{"tries": [record, ...], "current": state or None}`` from the task state store of one task
    instance (Airflow 3.3 ``task_state_store`` table, values JSON as the execution API stores them:
    ``airflow/api_fastapi/execution_api/routes/task_state_store.py``)."""
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(TaskStateStoreModel.key, TaskStateStoreModel.value).where(
        TaskStateStoreModel.dag_id == dag_id, TaskStateStoreModel.run_id == run_id,
        TaskStateStoreModel.task_id == task_id, TaskStateStoreModel.map_index == map_index,
        TaskStateStoreModel.key.in_((TRIES_KEY, CURRENT_KEY)),
    )
    with create_session() as session:
        stored = {row.key: row.value for row in session.execute(query)}
    values: dict[str, Any] = {}
    for key, text in stored.items():
        try:
            values[key] = json.loads(text)
        except (TypeError, ValueError):
            values[key] = None
    tries = values.get(TRIES_KEY)
    current = values.get(CURRENT_KEY)
    return {"tries": [item for item in tries if isinstance(item, dict)] if isinstance(tries, list) else [],
            "current": current if isinstance(current, dict) else None}


LIVE_READ_TIMEOUT_SECONDS = 5.0
"""Longest the page waits for the cluster (the page reloads every :data:`REFRESH_SECONDS`)."""


def read_trigger(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> tuple[str, dict[str, Any]] | None:
    """``(classpath, kwargs)`` of the trigger the task instance is deferred to, or ``None``
    (kwargs decrypted by ``Trigger.kwargs``, ``airflow/models/trigger.py``)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(Trigger).join(TaskInstance, TaskInstance.trigger_id == Trigger.id).where(
        TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == task_id,
        TaskInstance.map_index == map_index,
    )
    with create_session() as session:
        row = session.scalars(query).first()
        return None if row is None else (str(row.classpath), dict(row.kwargs))


def read_live_conditions(trigger: tuple[str, dict[str, Any]] | None) -> str | None:
    """The conditions of the ProvisioningRequest or Workload a gang trigger watches, read now
    (``triggers.progress.describe_conditions``; a Workload with its state, pending reason and admission
    checks, ``describe_workload``); ``None`` for no gang trigger, else a sentence
    saying why they could not be read. Never raises: the page shows what it has."""
    if trigger is None or not trigger[0].startswith("airflow_provider_gang.triggers."):
        return None
    import asyncio
    import importlib

    from airflow_provider_gang.kube.resources import PROVISIONING_REQUESTS, WORKLOADS
    from airflow_provider_gang.triggers.base import GangTrigger
    from airflow_provider_gang.triggers.progress import describe_conditions, describe_workload

    classpath, kwargs = trigger

    async def read() -> str:
        module, _, name = classpath.rpartition(".")
        kind = getattr(importlib.import_module(module), name)
        if not (isinstance(kind, type) and issubclass(kind, GangTrigger)):
            raise TypeError(f"{classpath} is not a gang trigger")
        gang = kind(**kwargs)
        found: list[str] = []
        async with await gang.connect() as client:
            if gang.objects.provisioning_request:
                request = await client.get(PROVISIONING_REQUESTS, gang.objects.provisioning_request, gang.namespace)
                found.append(describe_conditions("ProvisioningRequest", request))
            if gang.objects.workload_selector:
                selector = gang.objects.workload_selector
                workloads, _ = await client.list(WORKLOADS, gang.namespace, label_selector=selector)
                found.extend(describe_workload(workload) for workload in workloads)
        return "; ".join(text for text in found if text) or "no conditions yet"

    try:
        return asyncio.run(asyncio.wait_for(read(), LIVE_READ_TIMEOUT_SECONDS))
    except Exception as error:  # the cluster's answer is a bonus on this page, never a reason to fail it
        return f"could not read the cluster ({type(error).__name__}: {error})"


def waiting_rows(current: dict[str, Any], tries: list[dict[str, Any]], now: float,
                 conditions: str | None = None) -> dict[str, Any] | None:
    """What the try in progress waits for and for how long, or ``None`` when it has finished;
    ``conditions`` as :func:`read_live_conditions` read them."""
    try:
        state = task_state.read_current(current)
    except RecordError:
        return None
    if state is None or any(item.get("attempt") == state.plan.attempt for item in tries):
        return None
    from airflow_provider_gang.triggers.progress import describe_elapsed

    plan, event = state.plan, state.reservation_event
    if state.launched_at is not None:
        stage, since = "members launched, waiting for them to start and end", state.launched_at
    else:
        stage, since = "reservation requested, waiting for it to be granted", plan.requested_at
    return {
        "try": plan.attempt, "gang": plan.gang, "step": plan.step, "stage": stage,
        "waiting for": describe_elapsed(max(0.0, now - since)),
        "reservation": None if event is None else f"{event.reason.value}: {event.message}",
        "conditions now": conditions,
        "history": "in the task log (a line on every condition change, a heartbeat every 5 min)",
    }


def _tries_part(tries: list[dict[str, Any]]) -> str:
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_format(item.get(field)))}</td>"
                         for field in ("attempt", "step", "mode", "size", "outcome", "message")) + "</tr>"
        for item in tries
    )
    header = "".join(f"<th>{name}</th>" for name in ("try", "step", "mode", "size", "outcome", "reason / message"))
    return f'<h2>Tries</h2><table class="tries"><tr>{header}</tr>{rows}</table>'


def _format(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _table(title: str, rows: dict[str, Any]) -> str:
    body = "".join(
        f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(_format(value))}</td></tr>"
        for key, value in rows.items()
        if not isinstance(value, (dict, list))
    )
    return f"<h2>{html.escape(title)}</h2><table>{body}</table>"


def _summary_parts(summary: dict[str, Any]) -> list[str]:
    parts = [_table("Result", summary)]
    exit_codes = summary.get("exit_codes")
    if isinstance(exit_codes, dict):
        ordered = sorted(exit_codes.items(), key=lambda item: int(item[0]) if str(item[0]).isdigit() else -1)
        parts.append(_table("Exit codes", {f"rank {rank}": code for rank, code in ordered}))
    if isinstance(summary.get("all_tries"), dict):
        parts.append(_table("All tries of this run (failed ones included)", summary["all_tries"]))
    tries = "".join(
        f"<li>try {html.escape(_format(item.get('attempt')))}: {html.escape(_format(item.get('step')))} -&gt; "
        f"{html.escape(_format(item.get('outcome')))}"
        + (f" ({html.escape(str(item['message']))})" if item.get("message") else "") + "</li>"
        for item in summary.get("tries") or []
        if isinstance(item, dict)
    )
    parts.append(f"<h2>Tries</h2><ol>{tries}</ol>")
    return parts


PAGE_STYLE = (
    "body{font-family:system-ui,sans-serif;font-size:14px;margin:16px}"
    "th{text-align:left;padding:2px 16px 2px 0;font-weight:600}td{padding:2px 0}"
    ".status{font-size:16px;font-weight:600}.tries td{padding:2px 16px 2px 0;vertical-align:top}"
)


def render_page(
    dag_id: str, run_id: str, task_id: str, xcoms: dict[str, Any], task_instance: dict[str, Any] | None = None,
    task_state: dict[str, Any] | None = None, *, now: float | None = None, conditions: str | None = None,
) -> str:
    """HTML for the reservation page; every value is escaped. ``task_instance`` is what
    :func:`read_task_instance` returns (left out: no status line); while it is not finished the page
    reloads itself every :data:`REFRESH_SECONDS`. ``task_state`` is what :func:`read_task_state`
    returns: a failed task's status line ends with its last try's outcome and message, every
    finished try is listed with its reason, and an unfinished try's wait is shown ("Waiting", with
    ``conditions`` from :func:`read_live_conditions`)."""
    tries = list((task_state or {}).get("tries") or [])
    current = (task_state or {}).get("current")
    parts = [f"<h1>Gang of {html.escape(task_id)}</h1><p>{html.escape(dag_id)} / {html.escape(run_id)}</p>"]
    refresh = ""
    if task_instance is not None:
        exists = bool(task_instance.get("exists", True))
        if exists and task_instance.get("state") not in FINISHED_STATES:
            refresh = f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
        status = describe_state(task_instance.get("state"), task_instance.get("next_method"), exists=exists)
        try_number = task_instance.get("try_number")
        suffix = f" (try {html.escape(str(try_number))})" if try_number else ""
        last = tries[-1] if tries else None
        if last is not None and task_instance.get("state") in ("failed", "up_for_retry"):
            suffix += (f": try {html.escape(_format(last.get('attempt')))} ended "
                       f"{html.escape(_format(last.get('outcome')))} - {html.escape(_format(last.get('message')))}")
        parts.append(f'<p class="status">{html.escape(status)}{suffix}</p>')
    waiting = waiting_rows(current, tries, time.time() if now is None else now, conditions) if current else None
    if waiting is not None:
        parts.append(_table("Waiting", waiting))
    if not xcoms and not tries:
        parts.append("<p>No reservation recorded yet for this task instance.</p>")
    if isinstance(xcoms.get("reservation"), dict):
        parts.append(_table("Reservation", xcoms["reservation"]))
    if isinstance(xcoms.get("summary"), dict):
        parts.extend(_summary_parts(xcoms["summary"]))
    elif tries:
        parts.append(_tries_part(tries))
    title = f"<title>Gang of {html.escape(task_id)}</title>"
    head = f'<head><meta charset="utf-8">{refresh}{title}<style>{PAGE_STYLE}</style></head>'
    return f"<!doctype html><html>{head}<body>{''.join(parts)}</body></html>"


@gang_app.get("/api/reservation")
def reservation_api(
    user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str = "-1"
) -> dict[str, Any]:
    """JSON of what :func:`read_gang_xcoms` finds, plus ``task_instance`` (:func:`read_task_instance`)
    and ``task_state`` (:func:`read_task_state`)."""
    index = parse_map_index(map_index)
    return {**read_gang_xcoms(dag_id, run_id, task_id, index),
            "task_instance": read_task_instance(dag_id, run_id, task_id, index),
            "task_state": read_task_state(dag_id, run_id, task_id, index)}


@gang_app.get("/ui/reservation", response_class=HTMLResponse)
def reservation_page(user: GetUserDep, dag_id: str, run_id: str, task_id: str, map_index: str = "-1") -> str:
    """The page the extra link and the task-instance tab open."""
    index = parse_map_index(map_index)
    task_instance = read_task_instance(dag_id, run_id, task_id, index)
    conditions = None
    if task_instance.get("exists") and task_instance.get("state") not in FINISHED_STATES:  # deferred: a trigger row
        conditions = read_live_conditions(read_trigger(dag_id, run_id, task_id, index))
    return render_page(dag_id, run_id, task_id, read_gang_xcoms(dag_id, run_id, task_id, index), task_instance,
                       read_task_state(dag_id, run_id, task_id, index), conditions=conditions)


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

"""Airflow UI plugin: the Gang view of one gang task, the cluster-wide Gangs page and the JSON API behind them.

Registered through the ``airflow.plugins`` entry point in ``pyproject.toml``, which Airflow always
loads (the provider-info ``plugins`` key only loads with ``lazy_discover_providers=False``,
``LAZY_LOAD_PROVIDERS`` in apache/airflow ``airflow-core/src/airflow/settings.py``). The FastAPI app
(:mod:`.routes`) is mounted at ``/gang`` on the api-server.

The same page is reached two ways: the "Gang reservation" extra link (:mod:`airflow_provider_gang.links`)
and the "Gang" tab that :class:`GangPlugin`'s external view adds to every task instance page, where
the UI shows it in an iframe. What it shows comes from the metadata database, read in the
api-server process (:mod:`.stored_records`):

- the task instance's state and ``next_method``, which tell a gang waiting for capacity
  (deferred to ``execute_reserved``) from one that runs (deferred to ``execute_finished``);
- the task's XComs: ``links.RESERVATION_XCOM_KEY`` as soon as a try chose its reservation, the
  summary ``return_value`` once the gang succeeded (per-rank exit codes, GPU-hours of this try and
  of all tries, every try's step and outcome);
- the task state store, which ``operators.lifecycle`` writes and which, unlike XComs, survives
  retries: ``gang.tries`` gives every finished try's step, outcome (a ``reservation.phases.Reason``
  value) and message - so a failed task says why each try failed - and ``gang.current`` the try in
  progress: what it waits for and since when. Airflow 3.1 and 3.2 have no task state store: there
  the same keys are read from the task instance's history ConfigMap on the cluster
  (:mod:`.try_history`), and a page says so when the cluster did not answer.

While a try is deferred the page also shows the conditions its reservation waits on, read live
from the cluster (:mod:`.live`) with the connection its trigger row names. The task log has their
history (``triggers.progress`` logs every change and a heartbeat). :mod:`.gang_view` reads all of
it into typed values and :mod:`.rendering` turns those into HTML through a Jinja2 template.

The plugin also registers :mod:`.listener`, which withdraws the gangs of task instances that ended
without a try cleaning up (``airflow_provider_gang.sweep``).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_gang.links import PLUGIN_URL_PREFIX
from airflow_provider_gang.plugin import listener
from airflow_provider_gang.plugin.routes import gang_app

__all__ = ["GangPlugin"]


class GangPlugin(AirflowPlugin):
    """Mounts the reservation pages, adds a "Gang" tab on every task instance page and a "Gangs"
    entry to the UI's navigation (the cluster-wide page, ``routes.gangs_page``)."""

    name = "gang"
    fastapi_apps = [{"app": gang_app, "url_prefix": PLUGIN_URL_PREFIX, "name": "Gang reservations"}]
    external_views = [
        {
            "name": "Gang",
            "href": "gang/ui/reservation?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}",
            "destination": "task_instance",
            "url_route": "gang-reservation",
        },
        {
            "name": "Gangs",
            "href": "gang/ui/gangs",
            "destination": "nav",
            "url_route": "gangs",
        },
    ]
    listeners = [listener]  # withdraws the gangs of task instances that ended (plugin.listener)

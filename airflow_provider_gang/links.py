"""Extra link from a gang task instance to its reservation page.

Airflow 3 computes extra links on the worker in ``finalize()`` - also right after ``execute()``
defers - and stores the URL as the XCom ``_link_GangReservationLink``; the API server only reads
that XCom and never imports this class (``finalize`` in apache/airflow
``task-sdk/src/airflow/sdk/execution_time/task_runner.py``; ``xcom_key`` in
``sdk/bases/operatorlink.py``). The link therefore carries the task instance key only; the page
served by :mod:`airflow_provider_gang.plugin` looks the gang up from it. A relative, same-origin URL
is accepted by the UI.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from airflow.sdk import BaseOperatorLink

PLUGIN_URL_PREFIX = "/gang"
"""Where :class:`airflow_provider_gang.plugin.GangPlugin` mounts its FastAPI app."""


def reservation_page_url(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """Relative URL of the reservation page of one task instance."""
    query = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": str(map_index)}
    return f"{PLUGIN_URL_PREFIX}/ui/reservation?{urlencode(query)}"


class GangReservationLink(BaseOperatorLink):
    """The "Gang reservation" button on the task instance Details tab."""

    name = "Gang reservation"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        """URL of the page that shows this task instance's reservation, fallback steps and GPU-hours."""
        return reservation_page_url(ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index)


RESERVATION_XCOM_KEY = "gang_reservation"
"""XCom the operator pushes as soon as a try has chosen its reservation (name, mode, step, try)."""

SUMMARY_XCOM_KEY = "return_value"
"""XCom holding the final summary of a successful gang (the operator's return value)."""

GANG_SUMMARY_XCOM_KEY = "gang_summary"
"""XCom holding the summary of a successful ``@task.gang`` task, whose ``return_value`` is rank 0's."""

"""The Gang view and the Gangs page show every try on whichever Airflow this venv has: on 3.3 from the
task state store, on 3.1 and 3.2 from the history ConfigMap the tries wrote on the cluster
(``plugin.try_history``) - the same page either way, read through the plugin's HTTP routes as the
api-server serves them, for a task instance ``dag.test()`` really ran (try 1 waits past its
deadline, try 2 shrinks and succeeds). Then the cluster refuses every read of ConfigMaps: the pages
still answer with what the database has, and say the history could not be read.

Run by the main suite and by every venv of ``make versions``.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_provider_gang.sweep.airflow_state import has_task_state_store
from gang_sim.apiserver.http.faults import Faults
from tests.e2e.gang_dags import task_instance
from tests.versions.test_dag_runs import shrinking_dag

DAG_ID = "versions_pages"


def get(path: str, **params: str) -> str:
    """A page of the plugin's app for a viewer of the configured auth manager (the routes ask it
    which DAGs the user may read)."""
    from airflow.api_fastapi.app import create_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_provider_gang.plugin.routes import gang_app

    create_auth_manager()
    gang_app.dependency_overrides[get_user] = lambda: SimpleAuthManagerUser(username="viewer", role="viewer")
    try:
        response = TestClient(gang_app).get(path, params=params)
    finally:
        gang_app.dependency_overrides.clear()
    assert response.status_code == 200, response.text
    return str(response.text)


def gang_row(overview: str, run_id: str) -> list[str]:
    """The cells of the Gangs page's row of this test's task instance."""
    rows = [row for row in re.findall(r'<tr class="gang-row".*?</tr>', overview, re.S) if run_id in row]
    assert len(rows) == 1, overview
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", rows[0], re.S)]


LANE = re.compile(r'<g class="lane tone-(\w+)" data-attempt="(\d+)" data-outcome="([\w ]+)">')


def test_both_pages_show_every_try_and_say_when_the_cluster_keeps_it_from_them(
    cluster_factory: Any, run_dag: Any
) -> None:
    cluster = cluster_factory("small", time_scale=10)
    dag_run = run_dag(shrinking_dag(DAG_ID))
    assert (task_instance(dag_run).state, task_instance(dag_run).try_number) == ("success", 2)
    key = {"dag_id": DAG_ID, "run_id": dag_run.run_id, "task_id": "train"}

    page = get("/ui/reservation", **key)
    assert '<p class="status">Succeeded (try 2)</p>' in page
    assert LANE.findall(page) == [("failed", "1", "deadline"), ("succeeded", "2", "all_succeeded")]
    tries = page.split('<table class="tries">')[1].split("</table>")[0]
    assert "<td>1</td><td>as configured</td><td>provisioning_request</td><td>8</td><td>deadline</td>" in tries
    assert (
        "<td>2</td><td>shrink to 4 members</td><td>provisioning_request</td><td>4</td><td>all_succeeded</td>" in tries
    )
    assert "history-unread" not in page
    cells = gang_row(get("/ui/gangs"), dag_run.run_id)
    assert cells[0] == "succeeded" and cells[2:5] == ["2", "provisioning request", "4 members"], cells
    assert cells[7] == "all succeeded: all 4 members succeeded", cells

    if has_task_state_store():
        return  # Airflow 3.3: the history is in the database, the cluster is not read for it
    cluster.emulator.faults = Faults.parse("list/configmaps:1.0:503,get/configmaps:1.0:503")  # type: ignore[union-attr]
    page = get("/ui/reservation", **key)
    assert '<p class="status">Succeeded (try 2)</p>' in page  # what the database has
    unread = re.search(r'<div class="failure" id="history-unread">(.*?)</div>', page, re.S)
    assert unread is not None and "could not be read from the cluster" in unread.group(1), page
    assert "503" in unread.group(1), unread.group(1)
    assert '<table class="tries">' not in page
    cells = gang_row(get("/ui/gangs"), dag_run.run_id)
    assert cells[0] == "succeeded" and cells[2:5] == ["2", "not recorded", "not recorded"], cells
    assert cells[7].startswith("the try history could not be read from the cluster: "), cells

"""The UI integration under a real api-server (``GANG_STANDALONE=0`` skips it; no browser here).

The api-server (started with the other components, as ``airflow standalone`` would) loads
:class:`airflow_provider_gang.plugin.GangPlugin` through the ``airflow.plugins`` entry point, mounts
its FastAPI app at ``/gang`` and serves the extra link that the worker stored as the XCom
``_link_GangReservationLink`` (``finalize`` in
``task-sdk/src/airflow/sdk/execution_time/task_runner.py``). Two gangs run against emulated
clusters:

- ``gang_ui_waiting``: the ``demo`` scenario, its clock standing still, keeps zone us-central1-a
  stocked out, so the task stays deferred in ``ReservationTrigger``; its page shows the reservation;
- ``gang_ui_success``: the ``small`` scenario on a manual clock, moved step by step once Airflow has
  settled (:func:`~tests.standalone.environment.drive_until_finished`); the task succeeds and its
  page shows the summary.

Checked over HTTP, as the UI does: the plugin is listed by ``GET /api/v2/plugins`` with its FastAPI
app and its task-instance tab; ``GET .../taskInstances/train/links`` returns the link for both task
instances (the deferred one too); the page says "Waiting for capacity" with the reservation for the
deferred gang and shows the summary (per-rank exit codes, tries) for the finished one; the tab's URL
with ``{MAP_INDEX}`` left unsubstituted, as the 3.3.2 UI sends it for an unmapped task, opens the
page; the page and the JSON behind it answer an authenticated user (Bearer token or the UI's
``_token`` cookie) and 401/403 without one or with a forged one.

Run (about 1 minute on 2 cores; needs ~2 GB of RAM)::

    .venv/bin/python -m pytest -p no:cacheprovider tests/standalone/test_ui.py -s

The DAG file, the clusters and Airflow come from :mod:`tests.standalone.environment`.
``GANG_STANDALONE_KEEP=1`` keeps the temporary directory (logs, Airflow home) and prints its path.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import pytest

from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.standalone.components import Airflow
from tests.standalone.environment import (
    WAITING_AND_FAST,
    Setup,
    drive_until_finished,
    running_airflow,
    train_task,
    trigger,
    waiting_and_fast,
)

pytestmark = pytest.mark.timeout(900)

WAITING, SUCCESS = "gang_ui_waiting", "gang_ui_success"

DAGS = waiting_and_fast(
    file_name="gang_ui_dags.py",
    description="DAGs of tests/standalone/test_ui.py: one gang that waits (zone A stocked out), one that succeeds.",
    waiting=WAITING,
    success=SUCCESS,
    success_run_seconds=20,
)


@dataclass
class Runs:
    setup: Setup
    waiting_run: str
    success_run: str

    @property
    def airflow(self) -> Airflow:
        return self.setup.airflow


def start_runs(airflow: Airflow, fast: ClusterHarness) -> tuple[str, str]:
    """Trigger both DAGs; wait until the waiting one is deferred and the other one succeeded."""
    waiting_run, success_run = trigger(airflow, WAITING), trigger(airflow, SUCCESS)
    eventually(
        lambda: train_task(airflow, WAITING, waiting_run)["state"] in ("deferred", "failed"),
        timeout=240,
        what="deferred",
        interval=2,
    )
    assert train_task(airflow, WAITING, waiting_run)["state"] == "deferred", airflow.task_log(waiting_run)[-6000:]
    drive_until_finished(airflow, fast, {success_run: SUCCESS})
    assert train_task(airflow, SUCCESS, success_run)["state"] == "success", airflow.task_log(success_run)[-6000:]
    return waiting_run, success_run


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    with running_airflow("gang-ui-", DAGS, WAITING_AND_FAST) as setup:
        fast = setup.clusters["gang_fast"]
        assert fast.served is None  # on the manual clock, in this process
        waiting_run, success_run = start_runs(setup.airflow, fast)
        yield Runs(setup, waiting_run, success_run)


def _get(airflow: Airflow, path: str, headers: dict[str, str]) -> tuple[int, str]:
    """Status and body of a GET with exactly ``headers`` (no token unless given)."""
    request = urllib.request.Request(airflow.base_url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _page_path(dag_id: str, run_id: str, page: str = "ui/reservation") -> str:
    query = urlencode({"dag_id": dag_id, "run_id": run_id, "task_id": "train", "map_index": "-1"})
    return f"/gang/{page}?{query}"


def test_the_api_server_lists_the_plugin_with_its_app_and_task_instance_tab(runs: Runs) -> None:
    plugins = runs.airflow.request("GET", "/api/v2/plugins")["plugins"]
    (gang,) = [plugin for plugin in plugins if plugin["name"] == "gang"]
    assert [app["url_prefix"] for app in gang["fastapi_apps"]] == ["/gang"]
    views = {(view["name"], view["destination"], view["url_route"]) for view in gang["external_views"]}
    assert views == {("Gang", "task_instance", "gang-reservation"), ("Gangs", "nav", "gangs")}


@pytest.mark.parametrize("which", ["waiting", "success"])
def test_the_extra_link_is_served_for_the_task_instance(runs: Runs, which: str) -> None:
    """The worker stores the link when the task defers, so the waiting gang has it too."""
    dag_id, run_id = (WAITING, runs.waiting_run) if which == "waiting" else (SUCCESS, runs.success_run)
    links = runs.airflow.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/train/links")
    url = links["extra_links"]["Gang reservation"]
    assert url == _page_path(dag_id, run_id)
    status, page = _get(
        runs.airflow, urlsplit(url).path + "?" + urlsplit(url).query, {"Authorization": f"Bearer {runs.airflow.token}"}
    )
    assert status == 200, page
    assert "Gang of train" in page


def test_the_tab_of_a_task_that_is_not_mapped_opens_the_page(runs: Runs) -> None:
    """The UI leaves ``{MAP_INDEX}`` unsubstituted in the tab's iframe URL for an unmapped task."""
    path = _page_path(WAITING, runs.waiting_run).replace("map_index=-1", "map_index=%7BMAP_INDEX%7D")
    status, page = _get(runs.airflow, path, {"Cookie": f"_token={runs.airflow.token}"})
    assert status == 200, page
    assert "Waiting for capacity" in page


def test_the_page_of_a_waiting_gang_shows_its_reservation(runs: Runs) -> None:
    status, page = _get(runs.airflow, _page_path(WAITING, runs.waiting_run), {"Cookie": f"_token={runs.airflow.token}"})
    assert status == 200, page
    assert "Waiting for capacity" in page
    assert "us-central1-a" in page and "provisioning_request" in page
    assert "Result" not in page


def test_the_page_of_a_finished_gang_shows_its_summary(runs: Runs) -> None:
    airflow = runs.airflow
    answer = airflow.request("GET", _page_path(SUCCESS, runs.success_run, "api/reservation"))
    assert answer["task_instance"] == {"exists": True, "state": "success", "next_method": None, "try_number": 1}
    summary = answer["summary"]
    assert summary["size_run"] == 2 and summary["exit_codes"] == {"0": 0, "1": 0}
    status, page = _get(airflow, _page_path(SUCCESS, runs.success_run), {"Authorization": f"Bearer {airflow.token}"})
    assert status == 200, page
    assert "Succeeded" in page and summary["gang"] in page
    assert "<td>1</td><td>as configured</td><td>provisioning_request</td><td>2</td><td>all_succeeded</td>" in page
    assert "<dt>rank 0</dt><dd>0</dd>" in page and "<dt>rank 1</dt><dd>0</dd>" in page


@pytest.mark.parametrize("page", ["ui/reservation", "api/reservation"])
@pytest.mark.parametrize("credentials", [{}, {"Authorization": "Bearer not-a-token"}], ids=["none", "forged"])
def test_the_pages_refuse_requests_without_an_airflow_user(runs: Runs, page: str, credentials: dict[str, str]) -> None:
    status, body = _get(runs.airflow, _page_path(SUCCESS, runs.success_run, page), credentials)
    assert status in (401, 403), body
    assert runs.success_run not in body

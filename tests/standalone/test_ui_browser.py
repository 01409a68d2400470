"""The Gang page in a real browser: headless Chromium renders it for a waiting, a failed and a
finished gang under a real api-server (``GANG_STANDALONE=0`` skips it; so does a machine without
``/usr/bin/chromium``, which ``.ci/run`` installs).

Three gangs run on emulated clusters (:mod:`tests.standalone.environment`), in one Airflow:

- ``gang_browser_waiting``: 8 members strictly in us-central1-a of the ``demo`` scenario on a clock
  that stands still: the zone stays stocked out, the task stays deferred in ``ReservationTrigger``;
- ``gang_browser_failed``: 2 members on the ``small`` scenario; once both run, the test deletes
  member 0 (what an eviction does), the gang is torn down and its only try fails with a reason;
- ``gang_browser_success``: 2 members that finish after 20 simulated seconds.

For each, Chromium (:mod:`tests.standalone.browser`) opens the page as a user does: through
Airflow's login endpoint ``/auth/token/login?next=<page>``, which sets the UI's ``_token`` cookie and
redirects (the plugin's pages need an Airflow user, and the SimpleAuthManager takes no token in the
URL; this Airflow runs with ``simple_auth_manager_all_admins`` so that the browser can log in without
a form, https://airflow.apache.org/docs/apache-airflow/stable/core-concepts/auth-manager/simple/index.html).
Checked: each screenshot is a valid 1280x900 PNG with something drawn on it, and the rendered DOM
holds the page of that task instance with its state - "Waiting for capacity" and the reservation,
"Failed" with the reason the try failed for, "Succeeded" with the exit code of each rank.

Screenshots and DOM dumps stay in ``$GANG_ARTIFACTS`` (default ``build/test-artifacts/ui`` of the
checkout, ignored by git): ``waiting.png``, ``waiting.html``, ``failed.png``, ...

Run (about 2 minutes on 2 cores)::

    .venv/bin/python -m pytest -p no:cacheprovider tests/standalone/test_ui_browser.py -s
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from airflow_provider_gang.reservation import naming
from tests.standalone.browser import CHROMIUM, Rendering, blank_problems, read_png, render
from tests.standalone.components import Airflow
from tests.standalone.environment import WAITING_AND_FAST, Dags, GangDag, Setup, running_airflow, train_task, trigger
from tests.standalone.processes import wait_for

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium; .ci/run does)"),
]

REPOSITORY = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("GANG_ARTIFACTS") or REPOSITORY / "build" / "test-artifacts" / "ui")

WAITING, FAILED, SUCCESS = "gang_browser_waiting", "gang_browser_failed", "gang_browser_success"
DAG_IDS = {"waiting": WAITING, "failed": FAILED, "succeeded": SUCCESS}
DAGS = Dags("gang_ui_browser_dags.py", "DAGs of tests/standalone/test_ui_browser.py: a gang that waits, one that "
            "fails, one that succeeds.",
            (GangDag(WAITING, "gang_waiting", 8, "us-central1-a", 3600), GangDag(FAILED, "gang_fast", 2, None, 3600),
             GangDag(SUCCESS, "gang_fast", 2, None, 20)))
CONFIG = {"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}
"""The clusters are ``WAITING_AND_FAST``'s (``small`` at 4x, as ``test_ui.py``): faster, a trigger can
fire within a few seconds of the deferral, before the scheduler has processed the executor's
"success" event of the deferring process, and Airflow 3.3.2 then marks the resumed task failed
("Executor ... reported that the task instance ... finished with state success, but the task
instance's state attribute is running"); seen here at 6x."""
FINISHED = ("success", "failed", "upstream_failed")


@dataclass
class Page:
    """One state's task instance, what the page's JSON says about it, and Chromium's rendering."""

    dag_id: str
    run_id: str
    answer: dict[str, Any]
    rendering: Rendering


@dataclass
class Pages:
    setup: Setup
    by_state: dict[str, Page]


def page_path(dag_id: str, run_id: str, page: str = "ui/reservation") -> str:
    query = urlencode({"dag_id": dag_id, "run_id": run_id, "task_id": "train", "map_index": "-1"})
    return f"/gang/{page}?{query}"


def reservation_answer(airflow: Airflow, dag_id: str, run_id: str) -> dict[str, Any]:
    answer: dict[str, Any] = airflow.request("GET", page_path(dag_id, run_id, "api/reservation"))
    return answer


def member_phases(setup: Setup, gang: str) -> list[str]:
    output = setup.clusters["gang_fast"].kubectl("get", "pods", "-n", "default", "-l", f"{naming.GANG_LABEL}={gang}",
                                                 "-o", "jsonpath={.items[*].status.phase}")
    return output.split()


def fail_a_running_gang(setup: Setup, run_id: str) -> None:
    """Wait until both members of the ``FAILED`` gang run, then delete member 0."""
    airflow = setup.airflow

    def running_gang() -> str | None:
        answer = reservation_answer(airflow, FAILED, run_id)
        if answer["task_instance"]["state"] in FINISHED:
            raise AssertionError(f"the gang ended before it was failed: {answer}\n{airflow.task_log(run_id)[-4000:]}")
        gang = (answer.get("reservation") or {}).get("gang")
        running = answer["task_instance"]["next_method"] == "execute_finished"
        return gang if running and gang and member_phases(setup, gang) == ["Running", "Running"] else None

    gang = wait_for(running_gang, 240, "both members of the failing gang running", 1)
    members = setup.clusters["gang_fast"].names("pods", f"{naming.GANG_LABEL}={gang}")
    setup.clusters["gang_fast"].kubectl("delete", "-n", "default", "--wait=false", sorted(members)[0])


def wait_state(airflow: Airflow, dag_id: str, run_id: str, states: tuple[str, ...], timeout: float) -> str:
    def reached() -> str | None:
        state = train_task(airflow, dag_id, run_id)["state"]
        return str(state) if state in states else None

    state = wait_for(reached, timeout, f"{dag_id} in {states}", 1)
    assert state is not None
    return state


@pytest.fixture(scope="module")
def pages() -> Iterator[Pages]:
    with running_airflow("gang-ui-browser-", DAGS, WAITING_AND_FAST, CONFIG) as setup:
        airflow = setup.airflow
        runs = {state: trigger(airflow, dag_id) for state, dag_id in DAG_IDS.items()}
        assert wait_state(airflow, WAITING, runs["waiting"], ("deferred", *FINISHED), 240) == "deferred", \
            airflow.task_log(runs["waiting"])[-6000:]
        fail_a_running_gang(setup, runs["failed"])
        for state, dag_id in (("failed", FAILED), ("succeeded", SUCCESS)):
            expected = "failed" if state == "failed" else "success"
            assert wait_state(airflow, dag_id, runs[state], FINISHED, 300) == expected, \
                airflow.task_log(runs[state])[-6000:]
        by_state = {}
        for state, dag_id in DAG_IDS.items():
            login = f"{airflow.base_url}/auth/token/login?{urlencode({'next': page_path(dag_id, runs[state])})}"
            rendering = render(login, ARTIFACTS / f"{state}.png")
            (ARTIFACTS / f"{state}.html").write_text(rendering.dom)
            by_state[state] = Page(dag_id, runs[state], reservation_answer(airflow, dag_id, runs[state]), rendering)
        yield Pages(setup, by_state)


@pytest.mark.parametrize("state", list(DAG_IDS))
def test_each_screenshot_is_a_rendered_page(pages: Pages, state: str) -> None:
    page = pages.by_state[state]
    image = read_png(page.rendering.screenshot)
    assert blank_problems(image) == [], page.rendering.log[-2000:]


@pytest.mark.parametrize("state", list(DAG_IDS))
def test_the_browser_shows_the_page_of_that_task_instance(pages: Pages, state: str) -> None:
    """The login redirect landed on the Gang page (not a login form) of this run."""
    page = pages.by_state[state]
    assert "<title>Gang of train</title>" in page.rendering.dom, page.rendering.dom[:2000]
    assert f"{page.dag_id} / {page.run_id}" in page.rendering.dom
    assert page.answer["reservation"]["gang"] in page.rendering.dom


def test_the_waiting_gang_is_shown_waiting_with_its_reservation(pages: Pages) -> None:
    page = pages.by_state["waiting"]
    assert page.answer["task_instance"] == {"exists": True, "state": "deferred", "next_method": "execute_reserved",
                                            "try_number": 1}
    dom = page.rendering.dom
    assert '<p class="status">Waiting for capacity: the reservation is requested' in dom and "(try 1)</p>" in dom
    assert "<h2>Waiting</h2>" in dom
    assert "<th>stage</th><td>reservation requested, waiting for it to be granted</td>" in dom
    assert re.search(r"<th>waiting for</th><td>\d+ (s|min)</td>", dom), dom
    assert "<th>zone</th><td>us-central1-a</td>" in dom and "<th>mode</th><td>provisioning_request</td>" in dom
    assert "<h2>Result</h2>" not in dom
    assert '<meta http-equiv="refresh"' in dom


def test_the_failed_gang_is_shown_failed_with_its_reason(pages: Pages) -> None:
    """The deleted member ended the only try as ``member_lost``: the status line and the tries
    table say so, with the message the try recorded (the task log has the same reason)."""
    page = pages.by_state["failed"]
    assert page.answer["task_instance"]["state"] == "failed"
    assert "summary" not in page.answer
    dom = page.rendering.dom
    status = re.search(r'<p class="status">Failed \(try 1\): try 1 ended member_lost - (1 of 2 lost: rank \d[^<]*)</p>',
                       dom)
    assert status, dom
    assert f"<td>member_lost</td><td>{status[1]}</td></tr>" in dom
    assert "member_lost" in pages.setup.airflow.task_log(page.run_id)
    assert "Succeeded" not in dom and '<meta http-equiv="refresh"' not in dom


def test_the_finished_gang_is_shown_succeeded_with_its_summary(pages: Pages) -> None:
    page = pages.by_state["succeeded"]
    assert page.answer["task_instance"]["state"] == "success"
    assert page.answer["summary"]["exit_codes"] == {"0": 0, "1": 0}
    dom = page.rendering.dom
    assert '<p class="status">Succeeded (try 1)</p>' in dom
    assert "<th>rank 0</th><td>0</td>" in dom and "<th>rank 1</th><td>0</td>" in dom
    assert "try 1: as configured -&gt; all_succeeded" in dom
    assert '<meta http-equiv="refresh"' not in dom

"""The Gang page in a real browser: headless Chromium renders it for a waiting, a failed and a
finished gang under a real api-server (``GANG_STANDALONE=0`` skips it; so does a machine without
``/usr/bin/chromium``, which ``.ci/run`` installs).

Three gangs run in one Airflow, on one emulated cluster: the ``demo`` scenario on a manual clock,
zone us-central1-a stocked out for its first 600 simulated seconds (:mod:`tests.standalone.environment`):

- ``gang_browser_waiting``: 17 members strictly in that zone, more than it can ever hold; its page
  is taken while the clock stands at 0, the task deferred in ``ReservationTrigger``;
- then the test moves the clock past the stock-out, step by step (each step only once the
  scheduler has drained the executor event of every deferral, see :func:`settled`);
- ``gang_browser_failed``: 5 members; once all run, the test deletes member 0 (what an eviction
  does), the gang is torn down and its only try fails with a reason (``member_lost``);
- ``gang_browser_success``: 5 members that finish after 20 simulated seconds.

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
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.standalone.browser import CHROMIUM, Rendering, blank_problems, read_png, render
from tests.standalone.clusters import ClusterSpec, kubectl, names
from tests.standalone.components import Airflow
from tests.standalone.environment import FINISHED, Dags, GangDag, Setup, running_airflow, settled, train_task, trigger

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium; .ci/run does)"),
]

REPOSITORY = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("GANG_ARTIFACTS") or REPOSITORY / "build" / "test-artifacts" / "ui")

ZONE = "us-central1-a"
WAITING_SIZE = 17
"""One GPU more than the zone's quota and nodes hold (16): the waiting gang stays waiting after the
clock moves past the stock-out, while the other two get their capacity."""
SIZE = 5
"""Members of the other two gangs: more than the zone's one initial node holds (4 GPUs), so neither
gets capacity before the clock moves past the stock-out; both together fit its 4 nodes."""
WAITING, FAILED, SUCCESS = "gang_browser_waiting", "gang_browser_failed", "gang_browser_success"
DAG_IDS = {"waiting": WAITING, "failed": FAILED, "succeeded": SUCCESS}
DAGS = Dags(
    "gang_ui_browser_dags.py",
    "DAGs of tests/standalone/test_ui_browser.py: a gang that waits, one that fails, one that succeeds.",
    (
        GangDag(WAITING, "gang_waiting", WAITING_SIZE, ZONE, 3600),
        GangDag(FAILED, "gang_waiting", SIZE, ZONE, 3600),
        GangDag(SUCCESS, "gang_waiting", SIZE, ZONE, 20),
    ),
)
CLUSTERS = {"gang_waiting": ClusterSpec("demo", None)}
"""All three gangs on the ``demo`` scenario on a manual clock: zone us-central1-a is stocked out for
the first 600 simulated seconds, so each gang waits until the test moves the clock."""
CONFIG = {"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}


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


def cluster(setup: Setup) -> ClusterHarness:
    found = setup.clusters["gang_waiting"]
    assert found.served is None  # on the manual clock, in this process
    return found


def member_phases(setup: Setup, gang: str) -> list[str]:
    output = kubectl(
        cluster(setup),
        "get",
        "pods",
        "-n",
        "default",
        "-l",
        f"{naming.GANG_LABEL}={gang}",
        "-o",
        "jsonpath={.items[*].status.phase}",
    )
    return output.split()


def run_until_done(setup: Setup, runs: dict[str, str]) -> None:
    """Move the clock in steps, each once :func:`settled`: past the stock-out, then until the
    ``FAILED`` gang's members all run (member 0 is then deleted) and both gangs have finished."""
    airflow, failing = setup.airflow, runs["failed"]
    by_run = {run_id: DAG_IDS[state] for state, run_id in runs.items()}
    deleted = False
    for step in [601.0, 120.0] + [30.0] * 30:
        eventually(
            lambda: settled(airflow, by_run), timeout=120, what="deferrals drained by the scheduler", interval=0.5
        )
        answer = reservation_answer(airflow, FAILED, failing)
        gang = (answer.get("reservation") or {}).get("gang")
        if not deleted and answer["task_instance"]["state"] in FINISHED:
            raise AssertionError(f"the gang ended before it was failed: {answer}\n{airflow.task_log(failing)[-4000:]}")
        if (
            not deleted
            and gang
            and answer["task_instance"]["next_method"] == "execute_finished"
            and member_phases(setup, gang) == ["Running"] * SIZE
        ):
            members = names(cluster(setup), "pods", f"{naming.GANG_LABEL}={gang}")
            kubectl(cluster(setup), "delete", "-n", "default", "--wait=false", sorted(members)[0])
            deleted = True
        states = [train_task(airflow, DAG_IDS[state], runs[state])["state"] for state in ("failed", "succeeded")]
        if deleted and all(state in FINISHED for state in states):
            return
        cluster(setup).advance(step, timeout=120)
    raise AssertionError(f"the gangs did not finish: {states}")


@pytest.fixture(scope="module")
def pages() -> Iterator[Pages]:
    with running_airflow("gang-ui-browser-", DAGS, CLUSTERS, CONFIG) as setup:
        airflow = setup.airflow
        runs = {state: trigger(airflow, dag_id) for state, dag_id in DAG_IDS.items()}
        eventually(
            lambda: all(
                train_task(airflow, DAG_IDS[state], run_id)["state"] in ("deferred", *FINISHED)
                for state, run_id in runs.items()
            ),
            timeout=240,
            what="every gang deferred",
            interval=1,
        )
        by_state = {}

        def shoot(state: str) -> None:
            dag_id, run_id = DAG_IDS[state], runs[state]
            login = f"{airflow.base_url}/auth/token/login?{urlencode({'next': page_path(dag_id, run_id)})}"
            rendering = render(login, ARTIFACTS / f"{state}.png")
            (ARTIFACTS / f"{state}.html").write_text(rendering.dom)
            by_state[state] = Page(dag_id, run_id, reservation_answer(airflow, dag_id, run_id), rendering)

        shoot("waiting")  # before the clock moves: zone a is still stocked out
        run_until_done(setup, runs)
        for state in ("failed", "succeeded"):
            shoot(state)
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
    assert page.answer["task_instance"] == {
        "exists": True,
        "state": "deferred",
        "next_method": "execute_reserved",
        "try_number": 1,
    }
    dom = page.rendering.dom
    assert '<p class="status">Waiting for capacity: the reservation is requested' in dom and "(try 1)</p>" in dom
    assert "<h2>Waiting</h2>" in dom
    assert "<th>stage</th><td>reservation requested, waiting for it to be granted</td>" in dom
    assert re.search(r"<th>waiting for</th><td>\d+ (s|min)</td>", dom), dom
    # Read live from the cluster by the api-server, with the trigger's connection.
    conditions = re.search(r"<th>conditions now</th><td>([^<]*)</td>", dom)
    assert conditions and not conditions[1].startswith("could not read the cluster"), dom
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
    status = re.search(
        rf'<p class="status">Failed \(try 1\): try 1 ended member_lost - (1 of {SIZE} lost: rank \d[^<]*)</p>', dom
    )
    assert status, dom
    assert f"<td>member_lost</td><td>{status[1]}</td></tr>" in dom
    assert "member_lost" in pages.setup.airflow.task_log(page.run_id)
    assert "Succeeded" not in dom and '<meta http-equiv="refresh"' not in dom


def test_the_finished_gang_is_shown_succeeded_with_its_summary(pages: Pages) -> None:
    page = pages.by_state["succeeded"]
    assert page.answer["task_instance"]["state"] == "success"
    assert page.answer["summary"]["exit_codes"] == {str(rank): 0 for rank in range(SIZE)}
    dom = page.rendering.dom
    assert '<p class="status">Succeeded (try 1)</p>' in dom
    assert all(f"<th>rank {rank}</th><td>0</td>" in dom for rank in range(SIZE))
    assert "try 1: as configured -&gt; all_succeeded" in dom
    assert '<meta http-equiv="refresh"' not in dom

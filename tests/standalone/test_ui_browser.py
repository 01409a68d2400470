"""The Gang pages in a real browser: headless Chromium renders the Gang view of a waiting, a failed
(two tries) and a finished gang, and the cluster-wide Gangs page, under a real api-server
(``GANG_STANDALONE=0`` skips it; so does a machine without ``/usr/bin/chromium``, which ``.ci/run``
installs).

Three gangs run in one Airflow, on one emulated cluster: the ``demo`` scenario on a manual clock,
zone us-central1-a stocked out for its first 600 simulated seconds (:mod:`tests.standalone.environment`):

- ``gang_browser_waiting``: 17 members strictly in that zone, more than it can ever hold; its page
  is taken while the clock stands at 0, the task deferred in ``ReservationTrigger``;
- then the test moves the clock past the stock-out, step by step (each step only once the
  scheduler has drained the executor event of every deferral, see :func:`settled`);
- ``gang_browser_failed``: 5 members, one retry; once all members of a try run, the test deletes
  member 0 (what an eviction does), the gang is torn down and the try fails with a reason
  (``member_lost``) - both tries, so the task fails for good after two;
- ``gang_browser_success``: 5 members that finish after 20 simulated seconds.

For each, Chromium (:mod:`tests.standalone.browser`) opens the page as a user does: through
Airflow's login endpoint ``/auth/token/login?next=<page>``, which sets the UI's ``_token`` cookie and
redirects (the plugin's pages need an Airflow user, and the SimpleAuthManager takes no token in the
URL; this Airflow runs with ``simple_auth_manager_all_admins`` so that the browser can log in without
a form, https://airflow.apache.org/docs/apache-airflow/stable/core-concepts/auth-manager/simple/index.html).
Checked: each screenshot is a valid 1280x900 PNG with something drawn on it, and the rendered DOM
holds the page of that task instance with its state - "Waiting for capacity" and the reservation,
"Failed" with the reason the try failed for, "Succeeded" with the exit code of each rank; the
timeline has one lane per try (1, 2, 1); the Gangs page lists the gangs of all three DAGs, the
waiting one as waiting. Access (DAG-level permissions): the api-server runs the auth manager of
:mod:`tests.standalone.limited_auth`, whose second user may read only the waiting gang's DAG: its
Gangs page lists that DAG alone and the other DAGs' Gang pages answer 403.

Screenshots and DOM dumps stay in ``$GANG_ARTIFACTS`` (default ``build/test-artifacts/ui`` of the
checkout, ignored by git): ``waiting.png``, ``waiting.html``, ``failed.png``, ``overview.png`` ...;
with ``GANG_SCREENSHOTS_TO_DOCS=1`` the PNGs are also copied to ``docs/screenshots/`` (docs/airflow-ui.md shows them).

Run (about 2.5 minutes on 2 cores)::

    .venv/bin/python -m pytest -p no:cacheprovider tests/standalone/test_ui_browser.py -s
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from airflow_provider_gang.reservation import naming
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.standalone.browser import CHROMIUM, Rendering, blank_problems, read_png, render
from tests.standalone.clusters import ClusterSpec, kubectl, names
from tests.standalone.components import Airflow
from tests.standalone.environment import (
    FINISHED,
    REACTION_SECONDS,
    Dags,
    GangDag,
    Setup,
    running_airflow,
    settled,
    train_task,
    trigger,
)
from tests.standalone.limited_auth import CLASS_PATH, READABLE_DAG_VARIABLE, mint_token

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium; .ci/run does)"),
]

REPOSITORY = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("GANG_ARTIFACTS") or REPOSITORY / "build" / "test-artifacts" / "ui")
DOCS_SCREENSHOTS = REPOSITORY / "docs" / "screenshots"

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
        GangDag(FAILED, "gang_waiting", SIZE, ZONE, 3600, retries=1),
        GangDag(SUCCESS, "gang_waiting", SIZE, ZONE, 20),
    ),
)
CLUSTERS = {"gang_waiting": ClusterSpec("demo", None)}
"""All three gangs on the ``demo`` scenario on a manual clock: zone us-central1-a is stocked out for
the first 600 simulated seconds, so each gang waits until the test moves the clock."""
CONFIG = {
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
    "AIRFLOW__CORE__AUTH_MANAGER": CLASS_PATH,
    READABLE_DAG_VARIABLE: WAITING,
}
"""The browser logs in as the all-admins user; the limited user of :mod:`tests.standalone.limited_auth`
may read only ``WAITING`` (its explicit Bearer token wins over the all-admins middleware's header,
which is appended after it: ``get_user`` in ``airflow/api_fastapi/core_api/security.py``)."""
FAILED_TRIES = 2


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
    overview: Rendering
    limited: dict[str, tuple[int, str]]
    """What the one-DAG user got: ``"overview"`` and each state's page, as (status, body)."""


def as_user(airflow: Airflow, token: str, path: str) -> tuple[int, str]:
    request = urllib.request.Request(airflow.base_url + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def lanes(dom: str) -> list[tuple[str, str]]:
    """(attempt, tone) of each lane of the timeline, in order."""
    return [(attempt, tone) for tone, attempt in re.findall(r'<g class="lane tone-(\w+)" data-attempt="(\d+)"', dom)]


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


def try_ended(airflow: Airflow, run_id: str, try_number: int) -> bool:
    """Whether Airflow has ended try ``try_number`` of the ``FAILED`` gang's task: a later try has
    started, or the task instance waits for its retry or has finished."""
    task = reservation_answer(airflow, FAILED, run_id)["task_instance"]
    return bool(task["try_number"] != try_number or task["state"] in (*FINISHED, "up_for_retry"))


def run_until_done(setup: Setup, runs: dict[str, str]) -> None:
    """Move the clock in steps, each once :func:`settled`: past the stock-out, then until each try
    of the ``FAILED`` gang has all its members running (member 0 is then deleted), and both gangs
    have finished, ``FAILED`` on its second try.

    A retried try can be granted at once (try 1's capacity is free again), so its trigger may fire
    before the scheduler has drained the executor event of its deferral; Airflow then fails that try
    itself ("finished with state success, but the task instance's state attribute is running"),
    before it records its end. The page shows such a try as ended unrecorded, so the checks below
    hold on either path.

    The clock moves only while Airflow has settled, and each step gives the triggers
    ``REACTION_SECONDS`` of real time (as :func:`tests.standalone.environment.drive_until_finished`):
    else the simulated booking of a granted try could expire while its worker launches in real time.
    After member 0 is deleted the clock stands still until Airflow has ended that try."""
    airflow, failing = setup.airflow, runs["failed"]
    by_run = {run_id: DAG_IDS[state] for state, run_id in runs.items()}
    deleted: set[str] = set()
    for step in [601.0, 120.0] + [30.0] * 40:
        eventually(
            lambda: settled(airflow, by_run), timeout=120, what="deferrals drained by the scheduler", interval=0.5
        )
        answer = reservation_answer(airflow, FAILED, failing)
        gang = (answer.get("reservation") or {}).get("gang")
        ended_early = (answer["task_instance"]["try_number"] or 0) < FAILED_TRIES
        if ended_early and answer["task_instance"]["state"] in FINISHED:
            raise AssertionError(f"the gang ended before it was failed: {answer}\n{airflow.task_log(failing)[-4000:]}")
        if (
            gang
            and gang not in deleted
            and answer["task_instance"]["next_method"] == "execute_finished"
            and member_phases(setup, gang) == ["Running"] * SIZE
        ):
            members = names(cluster(setup), "pods", f"{naming.GANG_LABEL}={gang}")
            kubectl(cluster(setup), "delete", "-n", "default", "--wait=false", sorted(members)[0])
            deleted.add(gang)
            # The clock stands still until Airflow has ended that try (in real time: the trigger's
            # event, the scheduler, a worker running execute_finished), else the members' simulated
            # run time could pass first and the try succeed.
            ending = answer["task_instance"]["try_number"]
            eventually(
                functools.partial(try_ended, airflow, failing, ending),
                timeout=180,
                what=f"try {ending} of {FAILED} ended after its member was deleted",
                interval=0.5,
            )
            continue
        states = [train_task(airflow, DAG_IDS[state], runs[state])["state"] for state in ("failed", "succeeded")]
        if not ended_early and deleted and all(state in FINISHED for state in states):
            return
        cluster(setup).advance(step, timeout=120)
        time.sleep(REACTION_SECONDS)  # as drive_until_finished: the triggers see the step before the next
    raise AssertionError(
        f"the gangs did not finish: {states}; deleted {sorted(deleted)}; last answer {answer};"
        f" members {member_phases(setup, gang) if gang else None}\n{airflow.task_log(failing)[-6000:]}"
        f"\n{airflow.trigger_log(failing)[-8000:]}\n{airflow.describe()}"
    )


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

        def browse(name: str, path: str) -> Rendering:
            login = f"{airflow.base_url}/auth/token/login?{urlencode({'next': path})}"
            rendering = render(login, ARTIFACTS / f"{name}.png")
            (ARTIFACTS / f"{name}.html").write_text(rendering.dom)
            if os.environ.get("GANG_SCREENSHOTS_TO_DOCS") == "1":
                DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(rendering.screenshot, DOCS_SCREENSHOTS / f"{name}.png")
            return rendering

        def shoot(state: str) -> None:
            dag_id, run_id = DAG_IDS[state], runs[state]
            rendering = browse(state, page_path(dag_id, run_id))
            by_state[state] = Page(dag_id, run_id, reservation_answer(airflow, dag_id, run_id), rendering)

        shoot("waiting")  # before the clock moves: zone a is still stocked out
        run_until_done(setup, runs)
        for state in ("failed", "succeeded"):
            shoot(state)
        overview = browse("overview", "/gang/ui/gangs")
        token = mint_token(airflow.env)
        limited = {"overview": as_user(airflow, token, "/gang/ui/gangs")}
        for state, dag_id in DAG_IDS.items():
            limited[state] = as_user(airflow, token, page_path(dag_id, runs[state]))
        yield Pages(setup, by_state, overview, limited)


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
    assert "<dt>stage</dt><dd>reservation requested, waiting for it to be granted</dd>" in dom
    assert re.search(r"<dt>waiting for</dt><dd>\d+ (s|min)</dd>", dom), dom
    # Read live from the cluster by the api-server, with the trigger's connection.
    conditions = re.search(r"<dt>conditions now</dt><dd>([^<]*)</dd>", dom)
    assert conditions and not conditions[1].startswith("could not read the cluster"), dom
    assert "<dt>zone</dt><dd>us-central1-a</dd>" in dom and "<dt>mode</dt><dd>provisioning_request</dd>" in dom
    assert "<h2>Result</h2>" not in dom
    assert '<meta http-equiv="refresh"' in dom


def test_the_failed_gang_is_shown_failed_with_its_reason(pages: Pages) -> None:
    """The deleted member ended a try as ``member_lost``: the tries table says so with the message the
    try recorded, the status line and the failure box say why the last try ended (see
    :func:`run_until_done` for a try Airflow ended before it recorded its end)."""
    page = pages.by_state["failed"]
    assert page.answer["task_instance"]["state"] == "failed"
    assert page.answer["task_instance"]["try_number"] == FAILED_TRIES
    assert "summary" not in page.answer
    dom = page.rendering.dom
    recorded = {item["attempt"]: item for item in page.answer["task_state"]["tries"]}
    assert recorded and all(item["outcome"] == "member_lost" for item in recorded.values()), recorded
    for attempt, item in recorded.items():
        assert f"<td>{attempt}</td>" in dom and f"<td>member_lost</td><td>{item['message']}</td></tr>" in dom
    assert '<p class="status">Failed (try 2)' in dom
    if FAILED_TRIES in recorded:
        assert re.search(
            r'<div class="failure" id="failure"><b>Why it failed.</b> Try 2 ended: member lost\. 1 of', dom
        )
        assert "Failed for good after 2 tries" in dom
    else:
        assert "Try 2 ended without recording how: Airflow ended the task instance" in dom
    assert "member_lost" in pages.setup.airflow.task_log(page.run_id)
    assert "Succeeded" not in dom and '<meta http-equiv="refresh"' not in dom


def test_the_timeline_has_one_lane_per_try(pages: Pages) -> None:
    assert lanes(pages.by_state["waiting"].rendering.dom) == [("1", "active")]
    assert lanes(pages.by_state["failed"].rendering.dom) == [("1", "failed"), ("2", "failed")]
    assert lanes(pages.by_state["succeeded"].rendering.dom) == [("1", "succeeded")]
    # Each recorded try that ran has its running stage; each its teardown, zone and GPU-hours.
    failed = pages.by_state["failed"]
    ran = [item for item in failed.answer["task_state"]["tries"] if item["run_seconds"] is not None]
    assert failed.rendering.dom.count('class="stage-running fill-failed"') == len(ran)
    torn_down = [item for item in failed.answer["task_state"]["tries"] if item.get("teardown_ended_at") is not None]
    assert torn_down and failed.rendering.dom.count('class="stage-teardown fill-failed"') == len(torn_down)
    assert failed.rendering.dom.count(f"provisioning request · zone {ZONE}") >= len(torn_down)
    assert 'id="timeline-legend"' in failed.rendering.dom and "end of the try" in failed.rendering.dom
    assert failed.rendering.dom.count("GPU-h reserved") == len(failed.answer["task_state"]["tries"])


def test_the_finished_gang_is_shown_succeeded_with_its_summary(pages: Pages) -> None:
    page = pages.by_state["succeeded"]
    assert page.answer["task_instance"]["state"] == "success"
    assert page.answer["summary"]["exit_codes"] == {str(rank): 0 for rank in range(SIZE)}
    dom = page.rendering.dom
    assert '<p class="status">Succeeded (try 1)</p>' in dom
    assert all(f"<dt>rank {rank}</dt><dd>0</dd>" in dom for rank in range(SIZE))
    assert "<td>1</td><td>as configured</td><td>provisioning_request</td><td>5</td><td>all_succeeded</td>" in dom
    # The members table: every rank exited 0; rank 0's log (log_ranks default) links to Airflow's log view.
    members = dom.split('id="members"')[1].split("</table>")[0]
    assert len(re.findall(r"<td>Succeeded</td><td>0</td>", members)) == SIZE
    log_link = f'href="/dags/{SUCCESS}/runs/{quote(page.run_id)}/tasks/train?try_number=1"'
    assert (log_link in members) == ("0" in page.answer["summary"]["rank_logs"]), members
    assert log_link in dom  # the header's task log link
    assert '<meta http-equiv="refresh"' not in dom


def test_the_gangs_page_lists_every_dag_and_the_waiting_gang(pages: Pages) -> None:
    dom = pages.overview.dom
    assert blank_problems(read_png(pages.overview.screenshot)) == []
    rows = re.findall(r'<tr class="gang-row" data-phase="(\w+)" data-dag="(\w+)">', dom)
    assert sorted(rows) == sorted([("waiting", WAITING), ("failed", FAILED), ("succeeded", SUCCESS)]), dom
    assert rows[0] == ("waiting", WAITING)  # longest wait first: it still waits
    waiting = dom.split(f'data-dag="{WAITING}">')[1].split("</tr>")[0]
    assert f"{WAITING_SIZE} members" in waiting and "so far" in waiting and f"zone {ZONE}" in waiting
    assert "ProvisioningRequest" in waiting and "could not read the cluster" not in waiting


def test_a_user_limited_to_one_dag_sees_only_that_dag(pages: Pages) -> None:
    status, body = pages.limited["overview"]
    assert status == 200, body
    assert re.findall(r'data-dag="(\w+)"', body) == [WAITING]
    assert pages.limited["waiting"][0] == 200
    assert pages.limited["failed"][0] == 403 and pages.limited["succeeded"][0] == 403

"""The extra link and the UI plugin, through Airflow's own plugin discovery and FastAPI's client."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi import HTTPException

from airflow_provider_gang.links import GangReservationLink
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.plugin import GangPlugin
from airflow_provider_gang.plugin.gang_view import RESUME_METHODS, build_page, describe_state
from airflow_provider_gang.plugin.rendering import render_page
from airflow_provider_gang.plugin.routes import parse_map_index
from airflow_provider_gang.plugin.stored_records import TaskInstanceRow


def page_html(
    dag_id: str, run_id: str, task_id: str, xcoms: dict[str, Any], task_instance: TaskInstanceRow | None = None
) -> str:
    """The page of one task instance as the route renders it, without a task state."""
    return render_page(build_page(dag_id, run_id, task_id, xcoms, task_instance, now=0.0))


def test_link_points_at_the_plugin_page_of_the_task_instance() -> None:
    key = SimpleNamespace(dag_id="nightly", run_id="scheduled__2026-11-29T02:00:00+00:00", task_id="train", map_index=3)
    url = GangReservationLink().get_link(None, ti_key=key)
    parts = urlsplit(url)
    assert parts.path == "/gang/ui/reservation"
    assert parse_qs(parts.query) == {
        "dag_id": ["nightly"],
        "run_id": ["scheduled__2026-11-29T02:00:00+00:00"],
        "task_id": ["train"],
        "map_index": ["3"],
    }


def test_airflow_discovers_the_plugin_through_its_entry_point() -> None:
    from airflow import plugins_manager

    plugins, errors = plugins_manager._get_plugins()
    names = {plugin.name for plugin in plugins}
    assert "gang" in names, errors
    apps, _ = plugins_manager.get_fastapi_plugins()
    assert any(app["url_prefix"] == "/gang" for app in apps)


def test_page_escapes_values_and_lists_tries() -> None:
    page = page_html(
        "nightly",
        "run<1>",
        "train",
        {
            "reservation": {"gang": "nightly-train-t2-abc", "mode": "provisioning_request"},
            "summary": {
                "size_run": 4,
                "tries": [
                    {"attempt": 1, "step": "as configured", "outcome": "deadline"},
                    {"attempt": 2, "step": "shrink to 4", "outcome": "all_succeeded"},
                ],
            },
        },
    )
    assert "run&lt;1&gt;" in page
    assert "nightly-train-t2-abc" in page
    assert "try 2: shrink to 4 -&gt; all_succeeded" in page


SUCCEEDED_SUMMARY = {
    "gang": "nightly-train-t1-abc",
    "size_run": 2,
    "queue_seconds": 0.8844356536865234,
    "zone": None,
    "exit_codes": {"10": 0, "2": 0, "0": 1},
    "gpu_hours_reserved": 0.012097,
    "all_tries": {"gpu_hours_reserved": 0.5, "gpu_hours_used": 0.25, "gpu_hours_idle": 0.25},
    "tries": [
        {"attempt": 1, "step": "as configured", "outcome": "all_succeeded", "message": "all 2 members succeeded"}
    ],
}


def test_page_of_a_finished_gang_shows_exit_codes_by_rank_and_all_tries() -> None:
    """Nested values of the summary were silently dropped before (seen in a browser)."""
    page = page_html(
        "nightly",
        "r",
        "train",
        {"summary": SUCCEEDED_SUMMARY},
        TaskInstanceRow(True, state="success", try_number=1),
    )
    assert '<p class="status">Succeeded (try 1)</p>' in page
    assert "http-equiv" not in page
    ranks = page.split("<h2>Exit codes</h2>")[1].split("</dl>")[0]
    assert re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", ranks) == [
        ("rank 0", "1"),
        ("rank 2", "0"),
        ("rank 10", "0"),
    ]
    assert "<h2>All tries of this run (failed ones included)</h2>" in page
    # In units people read, and an absent zone in words, not "-".
    assert "<dt>gpu hours used</dt><dd>0.25 GPU-h</dd>" in page
    assert "<dt>queue seconds</dt><dd>0.9 s</dd>" in page
    assert "<dt>zone</dt><dd>any zone</dd>" in page
    assert "try 1: as configured -&gt; all_succeeded (all 2 members succeeded)" in page


def test_page_of_a_waiting_gang_says_it_waits_for_capacity() -> None:
    page = page_html(
        "nightly",
        "r",
        "train",
        {"reservation": {"gang": "g", "zone": "us-central1-a"}},
        TaskInstanceRow(True, state="deferred", next_method="execute_reserved", try_number=2),
    )
    assert "Waiting for capacity" in page and "(try 2)" in page
    assert '<meta http-equiv="refresh" content="10">' in page
    assert "<dt>zone</dt><dd>us-central1-a</dd>" in page
    assert "Result" not in page


@pytest.mark.parametrize(
    ("state", "next_method", "expected"),
    [
        (None, None, "Not scheduled yet"),
        ("deferred", "execute_reserved", "Waiting for capacity"),
        ("deferred", "execute_finished", "Running: the gang is launched"),
        ("deferred", "something_else", "Deferred (resumes in something_else)"),
        ("success", None, "Succeeded"),
        ("up_for_retry", None, "Failed; waiting for the next try"),
        ("upstream_failed", None, "Upstream failed"),
    ],
    ids=["not-scheduled", "reserving", "running", "unknown-method", "success", "retry", "other-state"],
)
def test_state_line(state: str | None, next_method: str | None, expected: str) -> None:
    assert describe_state(state, next_method).startswith(expected)


def test_missing_task_instance_says_so_and_does_not_refresh() -> None:
    page = page_html("d", "r", "t", {}, TaskInstanceRow(exists=False))
    assert "No such task instance" in page and "No reservation recorded yet" in page
    assert "http-equiv" not in page


def test_resume_methods_are_the_operator_methods() -> None:
    """The page tells waiting from running by ``next_method``; a renamed method must break this test."""
    for method in RESUME_METHODS:
        assert callable(getattr(GangTrainingOperator, method))


@pytest.mark.parametrize(("sent", "index"), [("{MAP_INDEX}", -1), ("", -1), ("-1", -1), ("3", 3)])
def test_map_index_from_the_tab_or_the_link(sent: str, index: int) -> None:
    """The 3.3.2 UI leaves ``{MAP_INDEX}`` as is on the tab of a task that is not mapped."""
    assert parse_map_index(sent) == index


def test_map_index_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(HTTPException) as refused:
        parse_map_index("three")
    assert refused.value.status_code == 422 and "map_index" in str(refused.value.detail)


def test_page_says_when_nothing_is_recorded() -> None:
    assert "No reservation recorded yet" in page_html("d", "r", "t", {})


def test_plugin_declares_a_task_instance_tab_and_a_gangs_nav_entry() -> None:
    tab, nav = GangPlugin.external_views
    assert tab["destination"] == "task_instance"
    assert "{RUN_ID}" in tab["href"] and not tab["href"].startswith("/")
    assert (nav["destination"], nav["name"], nav["href"]) == ("nav", "Gangs", "gang/ui/gangs")


def test_plugin_pages_need_an_airflow_user() -> None:
    """Plugin apps get no authentication from Airflow by default; ours asks for the UI's token."""
    from fastapi.testclient import TestClient

    from airflow_provider_gang.plugin.routes import gang_app

    client = TestClient(gang_app)
    query = {"dag_id": "d", "run_id": "r", "task_id": "t"}
    assert client.get("/ui/reservation", params=query).status_code == 401
    assert client.get("/api/reservation", params=query).status_code == 401
    assert client.get("/ui/gangs").status_code == 401


def test_the_app_compiles_every_template_when_it_starts() -> None:
    """Airflow's lifespan enters each mounted app's lifespan (``airflow/api_fastapi/app.py``); ours
    compiles the templates there, so the api-server's first request does not."""
    from fastapi.testclient import TestClient

    from airflow_provider_gang.plugin import rendering
    from airflow_provider_gang.plugin.routes import gang_app

    environment = rendering.environment()
    assert environment.cache is not None
    environment.cache.clear()
    with TestClient(gang_app):  # runs the lifespan
        compiled = len(environment.cache)
    assert compiled == len(environment.list_templates()) == 3

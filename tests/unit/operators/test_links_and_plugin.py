"""The extra link and the UI plugin, through Airflow's own plugin discovery and FastAPI's client."""

from __future__ import annotations

from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

from airflow_provider_gang.links import GangReservationLink
from airflow_provider_gang.plugin import GangPlugin, render_page


def test_link_points_at_the_plugin_page_of_the_task_instance() -> None:
    key = SimpleNamespace(dag_id="nightly", run_id="scheduled__2026-11-29T02:00:00+00:00", task_id="train", map_index=3)
    url = GangReservationLink().get_link(None, ti_key=key)
    parts = urlsplit(url)
    assert parts.path == "/gang/ui/reservation"
    assert parse_qs(parts.query) == {
        "dag_id": ["nightly"], "run_id": ["scheduled__2026-11-29T02:00:00+00:00"], "task_id": ["train"],
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
    page = render_page(
        "nightly", "run<1>", "train",
        {
            "reservation": {"gang": "nightly-train-t2-abc", "mode": "provisioning_request"},
            "summary": {"size_run": 4, "tries": [{"attempt": 1, "step": "as configured", "outcome": "deadline"},
                                                 {"attempt": 2, "step": "shrink to 4", "outcome": "all_succeeded"}]},
        },
    )
    assert "run&lt;1&gt;" in page
    assert "nightly-train-t2-abc" in page
    assert "try 2: shrink to 4 -> all_succeeded" in page


def test_page_says_when_nothing_is_recorded() -> None:
    assert "No reservation recorded yet" in render_page("d", "r", "t", {})


def test_plugin_declares_a_task_instance_tab() -> None:
    (view,) = GangPlugin.external_views
    assert view["destination"] == "task_instance"
    assert "{RUN_ID}" in view["href"] and not view["href"].startswith("/")


def test_plugin_pages_need_an_airflow_user() -> None:
    """Plugin apps get no authentication from Airflow by default; ours asks for the UI's token."""
    from fastapi.testclient import TestClient

    from airflow_provider_gang.plugin import gang_app

    client = TestClient(gang_app)
    query = {"dag_id": "d", "run_id": "r", "task_id": "t"}
    assert client.get("/ui/reservation", params=query).status_code == 401
    assert client.get("/api/reservation", params=query).status_code == 401

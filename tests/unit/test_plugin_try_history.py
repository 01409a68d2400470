"""The pages' read of the try history ConfigMaps (Airflow 3.1 and 3.2): ``plugin.try_history`` on the
emulator, with histories written by the provider's own ``operators.try_history.ClusterTryStore``;
where they are (``plugin.try_history``) from serialized tasks and rendered fields; and what a
malformed history gives (``stored_records.stored_task_state``, ``stored_records.read_tries``)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.operators.try_history import ClusterTryStore
from airflow_provider_gang.plugin import gangs_page, try_history
from airflow_provider_gang.plugin.gang_view import build_page
from airflow_provider_gang.plugin.rendering import render_overview, render_page
from airflow_provider_gang.plugin.stored_records import (
    GangTaskRow,
    StoredTaskState,
    TaskInstanceRow,
    read_tries,
    stored_task_state,
)
from airflow_provider_gang.plugin.try_history import HistoryPlace, place_of
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY
from airflow_provider_gang.sweep.serialized_tasks import gang_tasks_of
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness

CONN_ID = "history_cluster"
UNREACHABLE_CONN_ID = "history_unreachable"
RECORD = {"attempt": 1, "outcome": "deadline"}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[ClusterHarness]:
    """An emulated cluster behind the Airflow connection :data:`CONN_ID`, and a connection
    :data:`UNREACHABLE_CONN_ID` to a loopback port nothing listens on."""
    with ClusterHarness(seed=0) as harness:
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", connection_json(harness.kubeconfig_path))
        kubeconfig = yaml.safe_load(harness.kubeconfig_path.read_text())
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        for item in kubeconfig["clusters"]:
            item["cluster"]["server"] = f"https://127.0.0.1:{port}"
        unreachable = tmp_path / "unreachable-kubeconfig.yaml"
        unreachable.write_text(yaml.safe_dump(kubeconfig))
        monkeypatch.setenv(f"AIRFLOW_CONN_{UNREACHABLE_CONN_ID.upper()}", connection_json(unreachable))
        yield harness


def connection_json(kubeconfig_path: Any) -> str:
    """An Airflow connection in an environment variable, as ``demo.cluster.simulated_cluster`` sets it."""
    return json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig_path)}})


def on_cluster_of(harness: ClusterHarness) -> Callable[[Callable[[KubeClient], Awaitable[Any]]], Any]:
    """What ``TryRun.cluster`` is to a store: a fresh client per call."""
    settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text()))

    def run(work: Callable[[KubeClient], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            async with await ClientOptions().connect(settings) as client:
                return await work(client)

        return asyncio.run(main())

    return run


def write_history(harness: ClusterHarness, key: tuple[str, str, str, int], namespace: str, tries: list[Any]) -> None:
    dag_id, run_id, task_id, map_index = key
    store = ClusterTryStore(
        on_cluster_of(harness), namespace, dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index
    )
    store.set(TRIES_KEY, tries)


def place(key: tuple[str, str, str, int], namespace: str = "default", conn_id: str = CONN_ID) -> HistoryPlace:
    return HistoryPlace(kubernetes_conn_id=conn_id, namespace=namespace, name=naming.try_history_name(*key))


def list_and_get_counts(harness: ClusterHarness) -> tuple[int, int]:
    metrics = harness.run(harness.emulator.context.metrics.snapshot)["requests"]  # type: ignore[union-attr]
    return metrics.get("list", {}).get("configmaps", 0), metrics.get("get", {}).get("configmaps", 0)


def reset_counts(harness: ClusterHarness) -> None:
    harness.run(harness.emulator.context.metrics.reset)  # type: ignore[union-attr]


FIRST = ("nightly", "run-1", "train", -1)
SECOND = ("nightly", "run-2", "train", -1)
MAPPED = ("nightly", "run-1", "train", 3)
OTHER_NAMESPACE = ("team", "run-1", "train", -1)
NEVER_WROTE = ("nightly", "run-3", "train", -1)


def test_the_gangs_page_reads_every_history_with_one_list_per_cluster_and_namespace(cluster: ClusterHarness) -> None:
    write_history(cluster, FIRST, "default", [RECORD])
    write_history(cluster, SECOND, "default", [RECORD, {**RECORD, "attempt": 2}])
    write_history(cluster, MAPPED, "default", [])
    cluster.create("v1/namespaces", {"metadata": {"name": "team-a"}})
    write_history(cluster, OTHER_NAMESPACE, "team-a", [RECORD])
    never_wrote = {"metadata": {"name": naming.try_history_name(*NEVER_WROTE)}, "data": {TRIES_KEY: "[1]"}}
    cluster.create("v1/configmaps", never_wrote)
    reset_counts(cluster)
    places = {key: place(key) for key in (FIRST, SECOND, MAPPED, NEVER_WROTE)}
    places[OTHER_NAMESPACE] = place(OTHER_NAMESPACE, "team-a")

    found = try_history.read_histories(places)

    assert json.loads(found[FIRST].stored[TRIES_KEY]) == [RECORD]
    assert [item["attempt"] for item in json.loads(found[SECOND].stored[TRIES_KEY])] == [1, 2]
    assert json.loads(found[MAPPED].stored[TRIES_KEY]) == []
    assert json.loads(found[OTHER_NAMESPACE].stored[TRIES_KEY]) == [RECORD]
    assert found[NEVER_WROTE] == try_history.HistoryRead()  # same name, no history label: not selected
    assert all(answer.unread is None for answer in found.values())
    assert list_and_get_counts(cluster) == (2, 0)  # one LIST per namespace, no GET


def test_a_list_failing_past_its_retries_says_why_on_each_row_of_its_group(cluster: ClusterHarness) -> None:
    write_history(cluster, FIRST, "default", [RECORD])
    cluster.emulator.faults = Faults.parse("list/configmaps:1.0:503")  # type: ignore[union-attr]

    found = try_history.read_histories({FIRST: place(FIRST), SECOND: place(SECOND)})

    for key in (FIRST, SECOND):
        assert found[key].stored == {}
        assert str(found[key].unread).startswith("the try history could not be read from the cluster: ")
        assert "503" in str(found[key].unread), found[key].unread


def test_an_unreachable_cluster_does_not_blank_the_rows_of_another(cluster: ClusterHarness) -> None:
    write_history(cluster, FIRST, "default", [RECORD])

    found = try_history.read_histories({FIRST: place(FIRST), SECOND: place(SECOND, conn_id=UNREACHABLE_CONN_ID)})

    assert found[FIRST] == try_history.HistoryRead({TRIES_KEY: json.dumps([RECORD])})
    assert found[SECOND].stored == {}
    assert str(found[SECOND].unread).startswith("the try history could not be read from the cluster: ")


def test_the_gang_view_gets_one_history_with_one_get(cluster: ClusterHarness) -> None:
    write_history(cluster, FIRST, "default", [RECORD])
    reset_counts(cluster)
    assert try_history.read_history(FIRST, place(FIRST)).stored == {TRIES_KEY: json.dumps([RECORD])}
    assert try_history.read_history(SECOND, place(SECOND)) == try_history.HistoryRead()  # none written yet
    assert list_and_get_counts(cluster) == (0, 2)
    cluster.emulator.faults = Faults.parse("get/configmaps:1.0:503")  # type: ignore[union-attr]
    assert "503" in str(try_history.read_history(FIRST, place(FIRST)).unread)


def test_a_malformed_history_leaves_out_what_does_not_read_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    state = stored_task_state({TRIES_KEY: "[{not json", CURRENT_KEY: json.dumps({"plan": {"attempt": 1}})})
    assert state.tries == [] and state.current == {"plan": {"attempt": 1}}
    assert "gang.tries of the task instance is not JSON" in caplog.text
    caplog.clear()
    assert read_tries(stored_task_state({TRIES_KEY: json.dumps([{"attempt": "one"}])}).tries) == []
    assert "does not read" in caplog.text


@pytest.mark.parametrize(
    ("serialized", "rendered", "expected"),
    [
        pytest.param({"kubernetes_conn_id": "gke", "namespace": "ml"}, None, ("gke", "ml"), id="serialized"),
        pytest.param(
            {"namespace": "{{ params.ns }}"}, {"namespace": "ml-7"}, ("kubernetes_default", "ml-7"), id="rendered"
        ),
        pytest.param({"namespace": "{{ params.ns }}"}, None, ("kubernetes_default", "default"), id="never-rendered"),
        pytest.param(None, None, ("kubernetes_default", "default"), id="defaults-left-out"),
    ],
)
def test_where_a_history_is_comes_from_the_task_not_from_a_try(
    serialized: dict[str, Any] | None, rendered: dict[str, Any] | None, expected: tuple[str, str]
) -> None:
    found = place_of(FIRST, serialized, rendered)
    assert (found.kubernetes_conn_id, found.namespace) == expected
    assert found.name == naming.try_history_name(*FIRST)


def test_the_serialized_tasks_are_read_as_airflow_stores_them() -> None:
    data = {
        "dag": {
            "tasks": [
                {"__type": "operator", "__var": {"task_id": "train", "kubernetes_conn_id": "gke", "namespace": "ml"}},
                {"__type": "operator", "__var": {"task_id": "report"}},
                "not a task",
            ]
        }
    }
    assert gang_tasks_of(data) == {
        "train": {"kubernetes_conn_id": "gke", "namespace": "ml"},
        "report": {"kubernetes_conn_id": None, "namespace": None},
    }
    assert gang_tasks_of(None) == {} and gang_tasks_of({"dag": []}) == {}


UNREAD = "the try history could not be read from the cluster: could not read the cluster (KubeError: 503 <down>)"


def test_a_history_that_could_not_be_read_is_said_on_both_pages_not_taken_for_no_tries() -> None:
    finished = GangTaskRow("nightly", "r", "train", -1, "failed", None, 2, None)
    overview_page = gangs_page.build_overview([finished], now=0.0, unread={("nightly", "r", "train", -1): UNREAD})
    assert overview_page.rows[0].condition == UNREAD
    assert "503 &lt;down&gt;" in render_overview(overview_page)
    assert gangs_page.build_overview([finished], now=0.0).rows[0].condition == "task failed"

    task = TaskInstanceRow(True, state="failed", try_number=2)
    page = render_page(build_page("nightly", "r", "train", {}, task, StoredTaskState(), now=0.0, history_unread=UNREAD))
    assert '<div class="failure" id="history-unread"><b>Try history not shown:</b> ' in page
    assert "503 &lt;down&gt;" in page
    assert "No reservation recorded yet" not in page
    read = render_page(build_page("nightly", "r", "train", {}, task, StoredTaskState(), now=0.0))
    assert "history-unread" not in read and "No reservation recorded yet" in read

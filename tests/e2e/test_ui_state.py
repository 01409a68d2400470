"""The Gang page (``airflow_provider_gang.plugin``) says, from the task state store, what each try did and why a failed
one failed, and while a try waits, what it waits for and for how long - read through the page's
HTTP endpoint as the api-server serves it, for task instances that ``dag.test()`` really ran."""

from __future__ import annotations

import re
import threading
from datetime import timedelta
from typing import Any

from airflow_provider_gang.reservation.fallback import ShrinkTo
from airflow_provider_gang.reservation.phases import Reason
from tests.e2e.gang_dags import gang_dag, simulated_pod, task_instance


def gang_page(dag_id: str, run_id: str, path: str = "/ui/reservation") -> Any:
    """The page (or its JSON API) for task ``train``, the login dependency answered by a viewer of the
    configured auth manager (the routes ask it whether the user may read the DAG)."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_provider_gang.plugin.routes import gang_app

    gang_app.dependency_overrides[get_user] = lambda: SimpleAuthManagerUser(username="viewer", role="viewer")
    try:
        response = TestClient(gang_app).get(path, params={"dag_id": dag_id, "run_id": run_id, "task_id": "train"})
    finally:
        gang_app.dependency_overrides.clear()
    assert response.status_code == 200, response.text
    return response.json() if path.startswith("/api") else str(response.text)


def test_a_failed_task_shows_every_try_with_its_reason_and_message(cluster_factory: Any, run_dag: Any) -> None:
    cluster_factory("small", time_scale=60)
    dag = gang_dag(
        "ui_failed_tries",
        size=2,
        min_size=1,
        gpus=1,
        retries=1,
        deferrable=True,
        pod_template=simulated_pod(10, exit_code=3),
        fallbacks=[ShrinkTo(1, applies_to=frozenset({Reason.MEMBER_FAILED}))],
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "failed"
    page = gang_page(dag_run.dag_id, dag_run.run_id)
    status = re.search(r'<p class="status">(.*?)</p>', page)
    assert status is not None
    assert status.group(1).startswith("Failed (try 2): try 2 ended member_failed - ")
    assert "exit" in status.group(1) and "code 3" in status.group(1), status.group(1)  # the failed member's
    tries = page.split('<table class="tries">')[1].split("</table>")[0]
    assert re.search(
        r"<td>1</td><td>as configured</td><td>provisioning_request</td><td>2</td>"
        r"<td>member_failed</td><td>[^<]*code 3",
        tries,
    ), tries
    assert re.search(
        r"<td>2</td><td>shrink to 1 members</td><td>provisioning_request</td><td>1</td>"
        r"<td>member_failed</td>",
        tries,
    ), tries
    assert "<h2>Waiting</h2>" not in page and "http-equiv" not in page
    state = gang_page(dag_run.dag_id, dag_run.run_id, "/api/reservation")["task_state"]
    assert [(item["attempt"], item["outcome"]) for item in state["tries"]] == [
        (1, "member_failed"),
        (2, "member_failed"),
    ]
    assert state["current"] is None


LIVE = "<dt>conditions now</dt><dd>ProvisioningRequest"
"""The Waiting table of a deferred try, with its conditions read from the cluster."""


def test_a_waiting_try_shows_its_wait_then_the_reason_it_ended(cluster_factory: Any, run_dag: Any) -> None:
    cluster_factory("small", time_scale=60)  # four 1-GPU nodes: eight members are never granted
    dag = gang_dag(
        "ui_waiting",
        size=8,
        gpus=1,
        deferrable=True,
        pod_template=simulated_pod(10),
        reservation_timeout=timedelta(seconds=4),
    )
    pages: list[str] = []
    stop = threading.Event()

    def look() -> None:  # a person reloading the page while dag.test() runs the task
        while not stop.is_set() and not any(LIVE in page for page in pages):
            run_id = _run_id("ui_waiting")
            if run_id:
                pages.append(gang_page("ui_waiting", run_id))
            stop.wait(0.3)

    viewer = threading.Thread(target=look)
    viewer.start()
    try:
        dag_run = run_dag(dag)
    finally:
        stop.set()
        viewer.join(timeout=30)
    waiting = next((page for page in pages if LIVE in page), "")
    assert waiting, [re.findall(r'class="status">(.*?)</p>|conditions now</dt><dd>(.*?)</dd>', page) for page in pages]
    rows = waiting.split("<h2>Waiting</h2>")[1].split("</dl>")[0]
    assert "<dt>stage</dt><dd>reservation requested, waiting for it to be granted</dd>" in rows
    assert re.search(r"<dt>waiting for</dt><dd>\d s</dd>", rows), rows
    assert "<dt>try</dt><dd>1</dd>" in rows and "<dt>step</dt><dd>as configured</dd>" in rows
    # read live from the cluster, through the trigger row's kubernetes_conn_id, as the api-server would
    assert re.search(r"<dt>conditions now</dt><dd>ProvisioningRequest Accepted=True[^<]*Provisioned=False", rows), rows
    ended = gang_page(dag_run.dag_id, dag_run.run_id)
    assert "<h2>Waiting</h2>" not in ended
    assert re.search(r'<p class="status">Failed \(try 1\): try 1 ended deadline - deadline reached after', ended)
    # Never granted, the try waited until its teardown began: its lane draws both, beside the legend.
    lane = ended.split('<g class="lane tone-failed" data-attempt="1"')[1].split("</g>")[0]
    assert re.findall(r'class="stage-(\w+) fill-failed"', lane) == ["waiting", "teardown"], lane
    assert 'id="timeline-legend"' in ended and "end of the try" in ended


def _run_id(dag_id: str) -> str:
    """The run ``dag.test()`` is running for ``dag_id`` (the newest), or ``""`` before it exists."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run = session.scalars(
            select(DagRun.run_id).where(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).limit(1)
        ).first()
    return run or ""

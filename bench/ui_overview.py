"""How fast the cluster-wide Gangs page is served with 1,000 gang task instances in the metadata DB.

A fresh Airflow metadata database (SQLite, ``airflow db migrate`` in a temporary ``AIRFLOW_HOME``) is
seeded through Airflow's own tables (SQLAlchemy Core inserts into ``dag_bundle``, ``dag``,
``dag_run``, ``task_instance``, ``task_state_store``) with ``--rows`` task instances over 20 DAGs:
30 % waiting for their reservation (``gang.current``, deferred), 10 % running (members launched),
60 % finished (``gang.tries`` of one to three records, succeeded or failed). The records are the
provider's own (``reservation.records.tries``), so the page reads them as it reads real ones.

The plugin's FastAPI app is then called in-process (``fastapi.testclient``) as an admin of the
SimpleAuthManager (the login dependency answered by that user; the DAG filter is still the auth
manager's ``get_authorized_dag_ids``), inside the app's lifespan as the api-server runs it (the page
modules imported and the templates compiled at its start: ``plugin.routes.load_pages``). Measured:
that start, the first request (every stored record parsed), then the median of ``--repeat`` reloads
(records memoized on their stored text):

- ``gangs``: ``GET /ui/gangs`` (all rows: two queries, parse, sort, render);
- anchor ``one task``: ``GET /ui/reservation`` of one finished task instance (four queries), the
  page a user opens from the task, in the same process and database.

Printed: the start, both first requests and medians in ms, the ratio, and whether ``gangs``' reloads
and first request are under the 300 ms target. Not included: the live LISTs of waiting gangs (none of
the seeded rows has a trigger row): they cost one LIST per kind per cluster and namespace, whatever
the number of rows (``plugin.live.read_conditions_by_task``).

Run::

    .venv/bin/python -m bench.ui_overview --rows 1000
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

DAGS = 20
TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "trainer:sim"}]}}
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
TARGET_MS = 300.0


def prepare_home(home: Path) -> None:
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__API_AUTH__JWT_SECRET": uuid.uuid4().hex,
        }
    )
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": "admin"}))
    airflow = Path(sys.executable).with_name("airflow")
    subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True, timeout=600)


def seed(rows: int, now: float) -> tuple[str, str]:
    """Insert the rows; return (dag_id, run_id) of one finished task instance (the anchor's)."""
    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.dagrun import DagRun
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import insert, select

    from airflow_provider_gang.reservation.phases import Reason
    from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY
    from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
    from airflow_provider_gang.reservation.spec import GangSpec

    moment = datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc)
    spec = GangSpec(
        name="bench-train-t1-00000000",
        namespace="ml",
        size=8,
        pod_template=TEMPLATE,
        zone="us-central1-a",
        provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
    )
    dag_ids = [f"bench_dag_{index:02d}" for index in range(DAGS)]
    with create_session() as session:
        session.execute(insert(DagBundleModel.__table__), [{"name": "bench", "active": True}])
        session.execute(
            insert(DagModel.__table__),
            [
                {
                    "dag_id": dag_id,
                    "is_paused": False,
                    "is_stale": False,
                    "bundle_name": "bench",
                    "timetable_type": "",
                    "partition_mapper_info": None,
                    "max_active_tasks": 16,
                    "max_consecutive_failed_dag_runs": 0,
                    "has_task_concurrency_limits": False,
                }
                for dag_id in dag_ids
            ],
        )
        runs = [(dag_ids[index % DAGS], f"manual__bench_{index:05d}") for index in range(rows)]
        session.execute(
            insert(DagRun.__table__),
            [
                {"dag_id": d, "run_id": r, "run_type": "manual", "run_after": moment, "state": "running"}
                for d, r in runs
            ],
        )
        found = session.execute(select(DagRun.id, DagRun.dag_id, DagRun.run_id))
        run_ids = {(row.dag_id, row.run_id): row.id for row in found}
        instances, stored = [], []
        for index, (dag_id, run_id) in enumerate(runs):
            kind = index % 10
            plan = TryPlan(
                attempt=1 + index % 3,
                gang=f"bench-train-t1-{index:08d}",
                step="as configured",
                step_index=None,
                spec=spec,
                requested_at=now - 60.0 * (index % 240),
                reservation_deadline=now + 3600.0,
                deadline_reason=Reason.DEADLINE,
                start_deadline=None,
            )
            method: str | None
            if kind < 4:
                state, method = "deferred", "execute_reserved" if kind < 3 else "execute_finished"
                current = TryState(plan=plan, launched_at=None if kind < 3 else now - 30.0)
                values = {CURRENT_KEY: json.dumps(current.to_dict())}
            else:
                state, method = ("success", None) if kind < 8 else ("failed", None)
                records = [
                    TryRecord(
                        attempt=attempt,
                        gang=plan.gang,
                        step="as configured",
                        step_index=None,
                        mode="provisioning_request",
                        size=8,
                        outcome="all_succeeded" if state == "success" and attempt == plan.attempt else "member_lost",
                        message="1 of 8 lost: rank 3",
                        retryable=True,
                        queue_seconds=120.0 * attempt,
                        provisioning_seconds=6.9,
                        run_seconds=3600.0,
                        gpu_seconds_reserved=8 * 3700.0,
                        gpu_seconds_used=8 * 3600.0,
                        gpu_seconds_idle=800.0,
                        exit_codes={str(rank): 0 for rank in range(8)},
                        requested_at=plan.requested_at,
                        zone=spec.zone,
                        provisioning_class=spec.provisioning_class,
                        teardown_started_at=plan.requested_at + 120.0 * attempt + 3606.9,
                        teardown_ended_at=plan.requested_at + 120.0 * attempt + 3609.0,
                    ).to_dict()
                    for attempt in range(1, plan.attempt + 1)
                ]
                values = {TRIES_KEY: json.dumps(records)}
            instances.append(
                {
                    "id": uuid.uuid4(),
                    "dag_id": dag_id,
                    "run_id": run_id,
                    "task_id": "train",
                    "map_index": -1,
                    "try_number": plan.attempt,
                    "pool": "default_pool",
                    "pool_slots": 1,
                    "state": state,
                    "next_method": method,
                }
            )
            for key, value in values.items():
                stored.append(
                    {
                        "dag_run_id": run_ids[(dag_id, run_id)],
                        "dag_id": dag_id,
                        "run_id": run_id,
                        "task_id": "train",
                        "map_index": -1,
                        "key": key,
                        "value": value,
                        "updated_at": moment,
                    }
                )
        session.execute(insert(TaskInstance.__table__), instances)
        session.execute(insert(TaskStateStoreModel.__table__), stored)
    anchor = next(run for index, run in enumerate(runs) if index % 10 == 5)
    return anchor


def median_ms(client: Any, path: str, params: dict[str, str], repeat: int) -> tuple[float, float, str]:
    """The first request's time (every stored record parsed), then the median of
    ``repeat`` more (what the page's reloads cost), in ms, and the last page."""
    started = time.perf_counter()
    answer = client.get(path, params=params)
    first = (time.perf_counter() - started) * 1000
    assert answer.status_code == 200, answer.text[:2000]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        answer = client.get(path, params=params)
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text[:2000]
    return first, statistics.median(times), answer.text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gang-bench-ui-") as directory:
        prepare_home(Path(directory))
        now = time.time()
        dag_id, run_id = seed(options.rows, now)

        from airflow.api_fastapi.app import create_auth_manager
        from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
        from airflow.api_fastapi.core_api.security import get_user
        from fastapi.testclient import TestClient

        from airflow_provider_gang.plugin.routes import gang_app

        create_auth_manager().init()
        gang_app.dependency_overrides[get_user] = lambda: SimpleAuthManagerUser(username="admin", role="admin")
        started = time.perf_counter()
        with TestClient(gang_app) as client:  # runs the app's lifespan, as the api-server's start does
            start_ms = (time.perf_counter() - started) * 1000
            gangs_first, gangs, page = median_ms(client, "/ui/gangs", {}, options.repeat)
            listed = page.count('class="gang-row"')
            assert listed == options.rows, f"the page lists {listed} rows, {options.rows} were seeded"
            anchor_first, anchor, _ = median_ms(
                client, "/ui/reservation", {"dag_id": dag_id, "run_id": run_id, "task_id": "train"}, options.repeat
            )
    print(f"rows in the metadata DB: {options.rows} gang task instances over {DAGS} DAGs (all listed)")
    print(f"app start (modules loaded, templates compiled): {start_ms:7.1f} ms, before the first request")
    print(f"gangs page:       first {gangs_first:7.1f} ms, then median {gangs:7.1f} ms over {options.repeat} reloads")
    print(f"anchor, one task: first {anchor_first:7.1f} ms, then median {anchor:7.1f} ms (the Gang view of one task)")
    print(f"ratio gangs / one task: {gangs / anchor:.1f}")
    print(f"target < {TARGET_MS:.0f} ms, reloads: {'met' if gangs < TARGET_MS else 'NOT met'}")
    print(f"target < {TARGET_MS:.0f} ms, first request: {'met' if gangs_first < TARGET_MS else 'NOT met'}")


if __name__ == "__main__":
    main()

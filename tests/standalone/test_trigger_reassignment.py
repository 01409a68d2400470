"""Waiting gangs survive a triggerer that stops and one that crashes (``GANG_STANDALONE=0`` skips it).

Airflow keeps a deferred task's trigger in the ``trigger`` table with the id of the triggerer job
running it. Another triggerer takes the row over (``Trigger.assign_unassigned``, Airflow 3.3.2) once
that job has ended (a graceful stop) or its heartbeat is older than ``[triggerer]
triggerer_health_check_threshold`` (a crash); it then builds the trigger anew from its stored
kwargs and runs it from the start. So a gang must keep waiting on its one reservation, and end as it
would have, whatever triggerer sees the grant.

Two runs of a DAG with a strict-zone gang of 8 wait in ``ReservationTrigger`` on the ``demo``
scenario, whose zone us-central1-a is stocked out for its first ten simulated minutes. The cluster
runs on a manual clock (in this process, :mod:`tests.standalone.clusters`), so capacity arrives
exactly when the test moves time on, however slow the machine. Then:

1. the first triggerer runs both triggers (``trigger.triggerer_id`` is its job id);
2. it gets SIGTERM and exits; a second ``airflow triggerer`` takes both triggers over and runs them;
3. the second one is SIGKILLed with everything it started (a crash: its job row still says
   running); a third one takes them over once the dead one's heartbeat is 10 s old;
4. capacity arrives (time moves on, but stands still while a worker runs the task, so the booking
   of a granted request cannot expire behind a slow worker): the third triggerer's reservation
   event resumes each task, its members are launched, run, and the tasks succeed in try 1.

Checked in the emulator's record of every committed change: exactly one ProvisioningRequest and
exactly 8 member pods were ever created per try, and nothing of either gang (no pod at all) is left
once the tasks ended. Neither the stop nor the crash ran the trigger's ``on_kill``.

Heartbeats are sped up for this module only (``[triggerer] job_heartbeat_sec`` 2 s, threshold 10 s).
Run (about 4-5 minutes on 2 cores)::

    .venv/bin/python -m pytest -p no:cacheprovider tests/standalone/test_trigger_reassignment.py -s
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from airflow_provider_gang.reservation import naming
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.standalone.clusters import ClusterSpec, kubectl, names
from tests.standalone.environment import Dags, GangDag, Setup, running_airflow, train_task, trigger

pytestmark = pytest.mark.timeout(1200)

DAG_ID = "gang_reassign"
SIZE = 8
RUN_SECONDS = 150
"""Simulated run time of the members: at STEP simulated seconds per poll, the run trigger fires at
least 15 polls after the task deferred to it (a trigger firing within seconds of the deferral meets
Airflow's stale executor event race, apache/airflow#72716)."""
STEP = 10.0
"""Simulated seconds per poll once capacity may arrive."""
GANG_KINDS = "provisioningrequests,podtemplates,pods,configmaps,services"
FINISHED = ("success", "failed", "upstream_failed", "skipped", "removed")

DAGS = Dags(
    "gang_reassign_dags.py",
    "DAG of tests/standalone/test_trigger_reassignment.py: a gang that waits.",
    (GangDag(DAG_ID, "gang_manual", SIZE, "us-central1-a", RUN_SECONDS),),
)
CLUSTERS = {"gang_manual": ClusterSpec("demo", None)}
CONFIG = {
    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
}


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    with running_airflow("gang-reassign-", DAGS, CLUSTERS, CONFIG) as started:
        yield started


def _cluster(setup: Setup) -> ClusterHarness:
    cluster = setup.clusters["gang_manual"]
    assert cluster.served is None  # on the manual clock, in this process
    return cluster


def _running_triggerer_job(setup: Setup, known: set[int]) -> int:
    """The id of the one running triggerer job not in ``known`` (waits for it to register)."""

    def new_jobs() -> list[int]:
        return [
            job_id
            for job_id, job in setup.airflow.triggerer_jobs().items()
            if job_id not in known and job["state"] == "running"
        ]

    jobs = eventually(new_jobs, timeout=180, what="a new triggerer job", interval=2)
    assert len(jobs) == 1, jobs
    return jobs[0]


def _wait_triggers_run_by(setup: Setup, runs: list[str], job_id: int) -> None:
    """Wait until both tasks are deferred with their trigger rows assigned to triggerer ``job_id``
    and that triggerer has started both triggers (their log line in its trigger log)."""

    def assigned() -> bool:
        rows = {row.run_id: (row.state, row.triggerer_id) for row in setup.airflow.trigger_rows(DAG_ID)}
        if any(rows.get(run) != ("deferred", job_id) for run in runs):
            return False
        return all("waiting for the" in setup.airflow.trigger_log(run, 1, job_id) for run in runs)

    eventually(assigned, timeout=240, what=f"both triggers running in triggerer job {job_id}", interval=2)


def _created(cluster: ClusterHarness, resource_suffix: str, gang: str) -> int:
    """How many objects of the gang the emulator ever created (ADDED) of that resource."""
    return sum(
        1
        for event, obj in cluster.changes(resource_suffix)
        if event == "ADDED" and obj["metadata"].get("labels", {}).get(naming.GANG_LABEL) == gang
    )


def _pump_until_finished(setup: Setup, runs: list[str]) -> dict[str, dict[str, object]]:
    """Move simulated time STEP seconds per poll while every unfinished task is deferred; hold it
    while a worker runs one (scheduled, queued, running). Return the finished task instances."""
    cluster = _cluster(setup)

    def poll() -> dict[str, dict[str, object]] | None:
        tasks = {run: train_task(setup.airflow, DAG_ID, run) for run in runs}
        states = {str(task["state"]) for task in tasks.values()} - set(FINISHED)
        if not states:
            return tasks
        if states == {"deferred"}:
            cluster.advance(STEP, timeout=120)
        return None

    finished: dict[str, dict[str, object]] = eventually(poll, timeout=600, what="both tasks finished", interval=1)
    return finished


def test_waiting_gangs_move_to_a_new_triggerer_after_a_stop_and_after_a_crash(setup: Setup) -> None:
    airflow, cluster = setup.airflow, _cluster(setup)
    first = _running_triggerer_job(setup, set())
    runs = [trigger(airflow, DAG_ID) for _ in range(2)]
    gangs = {run: naming.gang_name(DAG_ID, "train", run, attempt=1) for run in runs}
    _wait_triggers_run_by(setup, runs, first)
    assert {run: _created(cluster, "/provisioningrequests", gang) for run, gang in gangs.items()} == dict.fromkeys(
        runs, 1
    )

    # 2. A graceful stop: the job ends, its triggers are free at once.
    stopped = airflow.components["triggerer"]
    stopped.terminate()
    assert stopped.wait_exit(120), f"the triggerer did not exit on SIGTERM\n{stopped.describe()}"
    assert stopped.process.returncode == 0, stopped.describe()
    assert airflow.triggerer_jobs()[first]["end_date"] is not None
    assert {row.state for row in airflow.trigger_rows(DAG_ID)} == {"deferred"}
    airflow.start_component("triggerer")
    second = _running_triggerer_job(setup, {first})
    _wait_triggers_run_by(setup, runs, second)

    # 3. A crash: the job row still says running until its heartbeat is older than the threshold.
    crashed_at = time.monotonic()
    airflow.components["triggerer"].kill()
    assert airflow.triggerer_jobs()[second]["end_date"] is None
    airflow.start_component("triggerer")
    third = _running_triggerer_job(setup, {first, second})
    _wait_triggers_run_by(setup, runs, third)
    print(
        f"triggerer jobs {first} -> {second} (SIGTERM) -> {third} (SIGKILL, taken over after "
        f"{time.monotonic() - crashed_at:.0f} s)"
    )

    # Still one reservation per try, nothing deleted, nothing launched, no try ended.
    for run, gang in gangs.items():
        assert _created(cluster, "/provisioningrequests", gang) == 1, gang
        assert _created(cluster, "v1/pods", gang) == 0, gang
        assert names(cluster, GANG_KINDS, f"{naming.GANG_LABEL}={gang}") != [], gang
        assert train_task(airflow, DAG_ID, run)["try_number"] == 1

    # 4. Capacity arrives: zone A's stock-out ends at 600 simulated seconds.
    cluster.advance(600, timeout=120)
    tasks = _pump_until_finished(setup, runs)
    for run, gang in gangs.items():
        task = tasks[run]
        assert (task["state"], task["try_number"]) == ("success", 1), airflow.task_log(run)[-6000:]
        assert _created(cluster, "/provisioningrequests", gang) == 1, gang
        assert _created(cluster, "v1/pods", gang) == SIZE, gang
        assert names(cluster, GANG_KINDS, f"{naming.GANG_LABEL}={gang}") == [], gang
        assert airflow.task_log(run).count(f"Gang {gang}: launched {SIZE} members together") == 1
        # The run trigger ran in the third triggerer too (it overwrote the reservation trigger's log there).
        assert f"Gang {gang}: succeeded (all_succeeded)" in airflow.trigger_log(run, 1, third), gang
    assert kubectl(cluster, "get", "pods", "--all-namespaces", "-o", "name").split() == []
    assert "invoking on_kill" not in airflow.trigger_log()

"""A nightly burst through a production-shaped Airflow, every component killed once during it.

Airflow as the official Helm chart runs it (:mod:`tests.production.deployment`: two schedulers, two
triggerers, a dag-processor, an api-server, two Celery workers; PostgreSQL and Redis from Debian's
packages), one DAG run of ``GANG_BURST_GANGS`` gang tasks (default 60; :mod:`.burst`) against an
emulated cluster with room for part of them, and :mod:`.chaos` SIGKILLing a scheduler, a triggerer,
a Celery worker in the middle of a launch, the api-server and PostgreSQL while it runs. Then the
invariants of :mod:`.burst` (end states, every try recorded once, no duplicate, no orphan, no
trigger run past its handover) must hold, and the table row is printed at the end of the session.

The cluster (``burst_scenario.yaml``) runs in this process at ``TIME_SCALE`` times real time, its
store followed by a :class:`~tests.reliability.emulator_side.Ledger`; its control plane is killed
and started again on that store (:mod:`.chaos`), its nodes keep running. Run (60 gangs: about
5 minutes, 4 of them the burst, on our 2-core machine at a load average of 4)::

    .venv/bin/python -m pytest -p no:cacheprovider tests/production -s
    GANG_BURST_GANGS=200 .venv/bin/python -m pytest -p no:cacheprovider tests/production -s
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.production import conftest
from tests.production.burst import (
    DAG_ID,
    DUPLICATE_OF,
    SCENARIO,
    TIME_SCALE,
    BurstGang,
    Verdict,
    burst_gangs,
    check_task,
    gang_names,
    ran_past_handover,
    trigger_runs,
    write_dag,
)
from tests.production.chaos import FINISHED, Chaos, task_instances
from tests.production.deployment import Deployment, start_deployment
from tests.production.services import missing_services
from tests.reliability import table as reliability_table
from tests.reliability.emulator_side import Ledger
from tests.reliability.harness import Verdict as ReliabilityVerdict
from tests.standalone.clusters import connection_json
from tests.standalone.environment import trigger
from tests.standalone.processes import diagnosed_by

pytestmark = pytest.mark.timeout(1800)


@dataclass
class Burst:
    """The running environment of the test: the cluster, the deployment, the gangs."""

    cluster: ClusterHarness
    deployment: Deployment
    gangs: tuple[BurstGang, ...]
    directory: Path


@pytest.fixture(scope="module")
def burst() -> Iterator[Burst]:
    missing = missing_services()
    assert not missing, f"Debian packages missing: {', '.join(missing)} (apt-get install {' '.join(missing)})"
    directory = Path(tempfile.mkdtemp(prefix="gang-production-"))
    cluster = ClusterHarness(str(SCENARIO), time_scale=TIME_SCALE, kubeconfig_path=directory / "kubeconfig-burst")
    started: Deployment | None = None
    try:
        cluster.start()
        folder = directory / "dags"
        folder.mkdir()
        gangs = burst_gangs(conftest.burst_size())
        write_dag(folder, gangs)
        started = start_deployment(directory, folder, {"gang_burst": connection_json(cluster)})
        with diagnosed_by(started.describe):
            started.airflow.wait_ready((DAG_ID,))
        yield Burst(cluster, started, gangs, directory)
    finally:
        if started is not None:
            started.stop()
        cluster.stop()
        if os.environ.get("GANG_PRODUCTION_KEEP") == "1":
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def test_a_nightly_burst_survives_every_component_killed_once(burst: Burst) -> None:
    cluster, deployment, gangs = burst.cluster, burst.deployment, burst.gangs
    ledger = Ledger()
    unsubscribe = ledger.attach(cluster)
    began = time.monotonic()
    run_id = trigger(deployment.airflow, DAG_ID)
    chaos = Chaos(deployment, cluster, ledger, run_id, gangs)

    def finished() -> dict[str, dict[str, object]] | None:
        tasks = chaos.step()
        if tasks is None or not chaos.done or len(tasks) < len(gangs):
            return None
        return tasks if all(task["state"] in FINISHED for task in tasks.values()) else None

    with diagnosed_by(lambda: "\n".join(chaos.log) + "\n" + deployment.describe()):
        tasks = eventually(finished, timeout=1500, what="every task of the burst finished", interval=1)
    wall = time.monotonic() - began

    verdict = Verdict(gangs=len(gangs))
    by_task = {gang.task_id: Verdict(gangs=1) for gang in gangs}
    task_of_gang: dict[str, str] = {}
    for gang in gangs:
        task = tasks[gang.task_id]
        # The run id has "+" and ":" (manual__...+00:00): a bare "+" in a query string is a space.
        query = urllib.parse.urlencode({"dag_id": DAG_ID, "run_id": run_id, "task_id": gang.task_id})
        stored = deployment.airflow.request("GET", f"/gang/api/reservation?{query}")["task_state"]
        check_task(gang, task, stored, by_task[gang.task_id])
        for name in gang_names(gang, run_id, int(task["try_number"])):  # type: ignore[call-overload]
            task_of_gang[name] = gang.task_id
    try:
        eventually(
            lambda: not ledger.objects_of(set(task_of_gang)), timeout=60, what="no object of any gang left", interval=1
        )
    except AssertionError:
        for key, name in ledger.live.items():
            if name in task_of_gang:
                by_task[task_of_gang[name]].orphans.append(f"{key} of gang {name}")
    for duplicate in ledger.duplicates:
        named = DUPLICATE_OF.search(duplicate)
        owner = task_of_gang.get(named["gang"], "") if named else ""
        (by_task[owner] if owner else verdict).duplicates.append(duplicate)
    for own in by_task.values():
        verdict.add(own)
    cluster.run(unsubscribe)
    logs = {
        str(path): path.read_text(errors="replace")
        for path in deployment.airflow.home.rglob(f"dag_id={DAG_ID}/run_id=*/task_id=*/attempt=*.log.trigger.*.log")
    }
    runs = trigger_runs(logs)
    verdict.fired_twice, fired_again = ran_past_handover(runs)
    handed_over = len(runs) - len({run.trigger for run in runs})
    conftest.TABLE.append(
        conftest.Row(
            "nightly burst, every component killed once",
            verdict.gangs,
            verdict.tries,
            f"{len(deployment.kills)} ({', '.join(deployment.kills)})",
            len(verdict.duplicates),
            len(verdict.orphans),
            len(verdict.misrecorded),
            len(verdict.wrong_states),
            len(verdict.fired_twice),
            wall,
        )
    )
    for kill, unfinished in chaos.in_flight.items():
        harmed = [by_task[task_id] for task_id in sorted(unfinished)]
        reliability_table.record(
            f"nightly burst of {len(gangs)} gangs: {kill}",
            ReliabilityVerdict(
                duplicates=[line for own in harmed for line in own.duplicates],
                orphans=[line for own in harmed for line in own.orphans],
                wrong_steps=[line for own in harmed for line in own.wrong_states],
                misrecorded=[line for own in harmed for line in own.misrecorded],
            ),
            faults=1,
        )
    print("\n".join(chaos.log))
    print("\n".join(verdict.problems()))
    print(f"worker kill: {chaos.mid_launch}; restarted after exiting on their own: {chaos.restarts}")
    print(f"{len(runs)} trigger runs, {handed_over} handed over to another triggerer job; fired again there:")
    print("\n".join(fired_again) or "(none)")
    assert chaos.done, chaos.log
    assert verdict.problems() == [], verdict.problems()
    states = {state: sum(task["state"] == state for task in tasks.values()) for state in ("success", "failed")}
    assert states == {
        "success": sum(gang.fits for gang in gangs),
        "failed": sum(not gang.fits for gang in gangs),
    }
    assert task_instances(deployment, run_id) is not None

"""No orphan outlives its task: what a SIGKILLed ``airflow dags test`` leaves is withdrawn by the
next ``dags test`` run of the task (the listener, ``plugin.listener``) or by the sweep
(``python -m airflow_provider_gang.sweep``); a task instance the scheduler fails leaves nothing
after the listener; a retry's gang is kept; the cluster unreachable during the sweep is reported
and the next sweep deletes; a failing listener never fails the state change.

The gang waits for ever: 8 one-GPU members strictly in zone us-central1-a of the ``demo``
scenario, stocked out while its manual clock stands still. ``airflow dags test`` runs in a real
subprocess on this session's Airflow database and is killed with SIGKILL (its whole session), as a
developer does when SIGTERM and SIGINT do not stop the inline trigger.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.sweep import command, listener_actions
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.child_processes import child_environment

pytestmark = pytest.mark.timeout(300)

DAG_ID = "gang_orphans"
RETRYING_DAG_ID = "gang_orphans_retrying"
"""The DAG with ``retries=1``: an id of its own, because ``airflow dags test`` of a changed file keeps
running on the DAG version an earlier test stored for the same id (seen on 3.1-3.3: the run's task
instance gets the new file's ``max_tries`` but its DAG version the old ``retries``)."""
GANG_KINDS = (
    "v1/configmaps",
    "v1/podtemplates",
    "v1/services",
    "v1/pods",
    "autoscaling.x-k8s.io/v1/provisioningrequests",
)
DAG_FILE = '''
"""A gang that waits: zone us-central1-a of the demo scenario is stocked out."""
from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator

with DAG(dag_id="{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
    GangTrainingOperator(
        task_id="train", size=8, gpus=1, distributed="torch", zone="us-central1-a", strict_zone=True,
        pod_template={{"spec": {{"containers": [{{"name": "trainer", "image": "trainer:sim"}}]}}}},
        reservation_timeout=timedelta(minutes=20), deferrable=True, retries={retries},
    )
'''


@pytest.fixture
def cluster(cluster_factory: Any) -> ClusterHarness:
    started: ClusterHarness = cluster_factory("demo", time_scale=None)
    return started


@pytest.fixture
def dags_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "gang_orphans.py").write_text(textwrap.dedent(DAG_FILE.format(dag_id=DAG_ID, retries=0)))
    return folder


class DagsTest:
    """``airflow dags test <dag_id>`` in a session of its own, its output in ``log``."""

    def __init__(self, dags_folder: Path, log: Path, dag_id: str = DAG_ID) -> None:
        self.log = log
        env = {**child_environment(), "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder)}
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "airflow", "dags", "test", dag_id],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def kill(self) -> None:
        """SIGKILL the whole session: nothing gets to clean up."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)


@pytest.fixture
def dags_tests(dags_folder: Path, tmp_path: Path) -> Iterator[list[DagsTest]]:
    started: list[DagsTest] = []
    yield started
    for run in started:
        run.kill()


def start_dags_test(dags_folder: Path, tmp_path: Path, started: list[DagsTest], dag_id: str = DAG_ID) -> DagsTest:
    run = DagsTest(dags_folder, tmp_path / f"dags-test-{len(started) + 1}.log", dag_id)
    started.append(run)
    return run


def gangs(cluster: ClusterHarness) -> set[str]:
    """The gangs with an object on the cluster."""
    return {
        item["metadata"]["labels"][naming.GANG_LABEL]
        for kind in GANG_KINDS
        for item in cluster.objects(kind, "default")
        if naming.GANG_LABEL in (item["metadata"].get("labels") or {})
    }


def objects_of(cluster: ClusterHarness, gang: str) -> list[str]:
    selector = f"{naming.GANG_LABEL}={gang}"
    return [
        f"{kind}/{item['metadata']['name']}"
        for kind in GANG_KINDS
        for item in cluster.objects(kind, "default", label_selector=selector)
    ]


def wait_for_request(cluster: ClusterHarness, run: DagsTest, known: set[str]) -> str:
    """Wait until the run's gang waits on its ProvisioningRequest; its name."""

    def new_request() -> str | None:
        assert run.process.poll() is None, f"airflow dags test exited:\n{run.output()}"
        requests = cluster.objects("autoscaling.x-k8s.io/v1/provisioningrequests", "default")
        fresh = {item["metadata"]["labels"][naming.GANG_LABEL] for item in requests} - known
        return next(iter(fresh), None)

    return eventually(new_request, timeout=180, what="the dags test run's ProvisioningRequest", interval=0.5)


def sweep(*arguments: str) -> tuple[int, str]:
    out = io.StringIO()
    status = command.sweep(command.build_parser().parse_args(list(arguments)), out=out)
    return status, out.getvalue()


def task_instance(gang: str) -> Any:
    """The ORM task instance of the run whose try 1 made ``gang``."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        for ti in session.scalars(select(TaskInstance).where(TaskInstance.dag_id.in_((DAG_ID, RETRYING_DAG_ID)))):
            if naming.gang_name(ti.dag_id, "train", ti.run_id, attempt=1) == gang:
                return ti
    raise AssertionError(f"no task instance made {gang}")


def fail_as_the_scheduler_does(gang: str) -> str:
    """What the scheduler does to a running task instance without heartbeat
    (``_purge_task_instances_without_heartbeats``, then ``process_executor_events``): load its
    serialized task, ``handle_failure``; the state it left. The killed worker's task instance is
    put to ``running`` first (killed inside the inline trigger, ``dags test`` left it ``queued``)."""
    from airflow.models.dagbag import DBDagBag
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    key = task_instance(gang)
    with create_session() as session:
        ti = session.get(TaskInstance, key.id)
        ti.state = TaskInstanceState.RUNNING
        session.flush()
        dag = DBDagBag().get_dag_for_run(dag_run=ti.dag_run, session=session)
        assert dag is not None
        ti.task = dag.get_task(ti.task_id)
        ti.handle_failure(error="Task did not emit heartbeat within time limit", session=session)
        state = str(getattr(ti.state, "value", ti.state))
    return state


def test_a_killed_dags_test_is_withdrawn_by_the_next_run_and_by_the_sweep(
    cluster: ClusterHarness, dags_folder: Path, tmp_path: Path, dags_tests: list[DagsTest]
) -> None:
    first = start_dags_test(dags_folder, tmp_path, dags_tests)
    orphan = wait_for_request(cluster, first, set())
    first.kill()
    assert len(objects_of(cluster, orphan)) >= 4, objects_of(cluster, orphan)  # owner, template, request, Service

    status, dry_run = sweep()
    assert status == 0, dry_run
    assert f"default/{orphan}: withdraw - " in dry_run and "`airflow dags test` run whose process is gone" in dry_run
    assert "dry run: nothing deleted" in dry_run
    assert objects_of(cluster, orphan), "a dry run deleted something"

    second = start_dags_test(dags_folder, tmp_path, dags_tests)
    rerun = wait_for_request(cluster, second, {orphan})
    eventually(lambda: not objects_of(cluster, orphan), timeout=60, what="the orphan withdrawn by the next run")
    assert "killed `airflow dags test` run" in second.output(), second.output()

    status, listed = sweep()
    assert f"default/{rerun}: keep - " in listed, listed  # its process runs: it is not touched
    second.kill()
    status, swept = sweep("--delete")
    assert status == 0, swept
    assert f"default/{rerun}: withdrawn (" in swept, swept
    assert gangs(cluster) == set(), gangs(cluster)


def test_a_task_failed_by_the_scheduler_leaves_nothing(
    cluster: ClusterHarness, dags_folder: Path, tmp_path: Path, dags_tests: list[DagsTest]
) -> None:
    run = start_dags_test(dags_folder, tmp_path, dags_tests)
    gang = wait_for_request(cluster, run, set())
    run.kill()
    assert fail_as_the_scheduler_does(gang) == "failed"
    assert listener_actions.wait_for_withdrawals(60)
    assert objects_of(cluster, gang) == []
    assert gangs(cluster) == set()


def test_a_retry_keeps_its_gang_and_a_failing_listener_fails_nothing(
    cluster: ClusterHarness, tmp_path: Path, dags_tests: list[DagsTest]
) -> None:
    """``up_for_retry``: the next try adopts the gang, so the listener keeps it. Then the API server
    answers every request 503: the task is failed all the same and the gang stays, until a sweep
    once the cluster answers again."""
    folder = tmp_path / "retrying"
    folder.mkdir()
    (folder / "gang_orphans.py").write_text(textwrap.dedent(DAG_FILE.format(dag_id=RETRYING_DAG_ID, retries=1)))
    run = start_dags_test(folder, tmp_path, dags_tests, RETRYING_DAG_ID)
    gang = wait_for_request(cluster, run, set())
    run.kill()
    assert fail_as_the_scheduler_does(gang) == "up_for_retry"
    assert listener_actions.wait_for_withdrawals(60)
    assert len(objects_of(cluster, gang)) >= 4, "a gang the retry adopts was withdrawn"

    status, listed = sweep("--delete")  # the process is dead, but the task instance waits for its retry
    assert f"default/{gang}: keep - " in listed and "up_for_retry" in listed, listed

    cluster.emulator.faults = Faults.parse("list:1.0:503,get:1.0:503,delete:1.0:503")
    try:
        assert fail_as_the_scheduler_does_again(gang) == "failed"
        assert listener_actions.wait_for_withdrawals(120)
        assert len(objects_of(cluster, gang)) >= 4
        status, unreachable = sweep("--delete")
        assert status == 1 and "could not reach the cluster" in unreachable, unreachable
        assert len(objects_of(cluster, gang)) >= 4
    finally:
        cluster.emulator.faults = Faults()
    status, swept = sweep("--delete")
    assert status == 0 and f"default/{gang}: withdrawn (" in swept, swept
    assert gangs(cluster) == set()


def fail_as_the_scheduler_does_again(gang: str) -> str:
    """The retry's task instance (put back to running as a worker would) fails for good."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    key = task_instance(gang)
    with create_session() as session:
        ti = session.get(TaskInstance, key.id)
        ti.try_number += 1
        ti.state = TaskInstanceState.RUNNING
        ti.hostname, ti.pid = "another-worker", 1  # the retry ran elsewhere
    return fail_as_the_scheduler_does(gang)


def test_airflow_gang_sweep_is_an_airflow_command(cluster: ClusterHarness) -> None:
    """The provider's ``cli`` entry: ``airflow gang sweep`` lists the connection's namespace; a
    connection that does not exist is reported by name and the exit status says so."""
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "gang", "sweep", "--conn-id", "kubernetes_default", "--conn-id", "nowhere"],
        capture_output=True,
        text=True,
        timeout=180,
        env=child_environment(),
    )
    assert "Connection kubernetes_default, namespace default: 0 gang(s)" in result.stdout, result.stdout + result.stderr
    assert "Connection nowhere: " in result.stdout and "nowhere" in result.stdout.split("Connection nowhere: ")[1]
    assert result.returncode == 1, result.stdout + result.stderr


def test_the_gang_of_a_deleted_dag_run_is_withdrawn_unless_kept_as_unknown(
    cluster: ClusterHarness, dags_folder: Path, tmp_path: Path, dags_tests: list[DagsTest]
) -> None:
    """A deleted DAG run takes its task instances and task state with it: nothing of this Airflow
    names the gang any more, so it counts as gone - kept with ``--keep-unknown`` (a namespace shared
    with another Airflow), withdrawn without."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select
    from sqlalchemy.exc import SAWarning

    run = start_dags_test(dags_folder, tmp_path, dags_tests)
    gang = wait_for_request(cluster, run, set())
    run.kill()
    run_id = task_instance(gang).run_id
    # Deleting through the ORM loads DagRun.serialized_dag when the session flushes at commit, which
    # Airflow maps as one row; after earlier tests re-serialized the same DAG in this test database
    # there are several (an Airflow model warning, not about the provider). The filter encloses the
    # session, so it is still in force when the session commits on leaving its block.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        with create_session() as session:
            session.delete(session.scalars(select(DagRun).where(DagRun.run_id == run_id)).one())
    status, kept = sweep("--delete", "--keep-unknown")
    assert status == 0 and f"default/{gang}: keep - no task instance of this Airflow" in kept, kept
    assert len(objects_of(cluster, gang)) >= 4
    status, swept = sweep("--delete")
    assert status == 0 and f"default/{gang}: withdrawn (" in swept and "DAG run was deleted" in swept, swept
    assert gangs(cluster) == set()

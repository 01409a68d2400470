"""No orphan outlives its task, under the real scheduler (part of ``make test``; ``GANG_STANDALONE=0`` skips it).

A worker that is SIGKILLed runs no ``on_kill`` and no teardown: its gang would stay on the cluster
and, once capacity appears, keep booking GPU nodes. Here the real scheduler finds the task without
heartbeat (``_purge_task_instances_without_heartbeats`` in ``airflow/jobs/scheduler_job_runner.py``),
fails it (``retries=0``: ``handle_failure`` in ``process_executor_events``), and the provider's
listener running in the scheduler (``airflow_provider_gang.plugin.listener``) withdraws the gang.

- ``test_zombie_failed_by_the_scheduler_leaves_nothing``: a non-deferrable gang of 2
  (``deferrable=False``: the worker reserves and watches its members inline) on the ``small``
  scenario, its manual clock moved until both members run; then the LocalExecutor worker process
  (the task SDK supervisor, ``airflow worker -- LocalExecutor: ...``) and its task runner child
  (``airflow worker -- <task instance id>``, ``task_runner.py``) are SIGKILLed by PID. The task
  must end ``failed`` and nothing of the gang (owner ConfigMap, ProvisioningRequest, PodTemplate,
  pods, Service) may be left.

The heartbeat timeout is 15 s, checked every 5 s, with workers heartbeating at least every 2 s
(``[scheduler] task_instance_heartbeat_timeout``, ``task_instance_heartbeat_timeout_detection_interval``,
``[workers] min_heartbeat_interval``, ``airflow/config_templates/config.yml``).

Run (about 2 minutes on 2 cores)::

    .venv/bin/python -m pytest -p no:cacheprovider tests/standalone/test_zombie.py -s
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_gang.reservation import naming
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.standalone.clusters import ClusterSpec, names
from tests.standalone.environment import Dags, GangDag, Setup, running_airflow, train_task, trigger
from tests.standalone.processes import session_members

pytestmark = pytest.mark.timeout(600)

DAG_ID = "gang_standalone_zombie"
CONN_ID = "gang_zombie"
GANG_KINDS = "provisioningrequests,podtemplates,pods,configmaps,services"
HEARTBEAT_TIMEOUT_SECONDS = 15
CONFIG = {
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_SECONDS),
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "2",
}
DAGS = Dags(
    "gang_standalone_zombie_dags.py",
    "DAG of tests/standalone/test_zombie.py: a non-deferrable gang of 2 whose members run for an hour.",
    (GangDag(DAG_ID, CONN_ID, 2, None, 3600, retries=0, deferrable=False),),
)


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    with running_airflow("gang-zombie-", DAGS, {CONN_ID: ClusterSpec("small", None)}, CONFIG) as started:
        yield started


def _title(pid: int) -> str:
    """The process title (``setproctitle`` rewrites ``/proc/<pid>/cmdline``); "" once it exited."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _worker_processes(setup: Setup, task_instance_id: str) -> tuple[int, int]:
    """The task's supervisor (a LocalExecutor worker process of the scheduler) and its task runner."""
    scheduler = setup.airflow.components["scheduler"].process.pid
    runners = [pid for pid in session_members(scheduler) if _title(pid) == f"airflow worker -- {task_instance_id}"]
    assert len(runners) == 1, {pid: _title(pid) for pid in session_members(scheduler)}
    supervisor = _parent(runners[0])
    assert _title(supervisor).startswith("airflow worker -- LocalExecutor:"), _title(supervisor)
    return supervisor, runners[0]


def _members_running(cluster: ClusterHarness, gang: str) -> bool:
    pods = cluster.objects("v1/pods", "default", label_selector=f"{naming.GANG_LABEL}={gang}")
    return len(pods) == 2 and all((pod.get("status") or {}).get("phase") == "Running" for pod in pods)


def _run_until_members_run(setup: Setup, cluster: ClusterHarness, run_id: str, gang: str) -> None:
    """Move the manual clock 30 s at a time until both members run (the worker waits inline meanwhile)."""
    airflow = setup.airflow
    eventually(
        lambda: train_task(airflow, DAG_ID, run_id)["state"] in ("running", "failed"),
        timeout=240,
        what="task running",
        interval=1,
    )
    eventually(
        lambda: bool(names(cluster, "provisioningrequests", f"{naming.GANG_LABEL}={gang}")),
        timeout=120,
        what="the gang's ProvisioningRequest",
        interval=1,
    )
    for _ in range(20):
        assert train_task(airflow, DAG_ID, run_id)["state"] == "running", airflow.task_log(run_id)[-6000:]
        if _members_running(cluster, gang):
            return
        cluster.advance(30, timeout=120)
        try:
            eventually(lambda: _members_running(cluster, gang), timeout=3, what="members running", interval=0.5)
            return
        except AssertionError:
            continue
    raise AssertionError(f"the members never ran:\n{airflow.task_log(run_id)[-6000:]}")


def test_zombie_failed_by_the_scheduler_leaves_nothing(setup: Setup) -> None:
    airflow = setup.airflow
    cluster = setup.clusters[CONN_ID]
    run_id = trigger(airflow, DAG_ID)
    gang = naming.gang_name(DAG_ID, "train", run_id, attempt=1)
    selector = f"{naming.GANG_LABEL}={gang}"
    _run_until_members_run(setup, cluster, run_id, gang)
    before = names(cluster, GANG_KINDS, selector)
    kinds = {name.split("/")[0] for name in before}
    assert {"provisioningrequest.autoscaling.x-k8s.io", "podtemplate", "pod", "configmap", "service"} <= kinds, before

    supervisor, runner = _worker_processes(setup, train_task(airflow, DAG_ID, run_id)["id"])
    os.kill(supervisor, signal.SIGKILL)  # first, so that it cannot report its child's death
    os.kill(runner, signal.SIGKILL)
    eventually(lambda: not _title(supervisor) and not _title(runner), timeout=30, what="worker gone", interval=0.5)
    assert names(cluster, GANG_KINDS, selector) == before, "nothing ran the gang's teardown"

    eventually(
        lambda: train_task(airflow, DAG_ID, run_id)["state"] == "failed",
        timeout=120,
        what="the scheduler failing the task without heartbeat",
        interval=1,
    )
    eventually(
        lambda: names(cluster, GANG_KINDS, selector) == [],
        timeout=90,
        what="every gang object withdrawn by the listener",
        interval=1,
    )
    scheduler_log = airflow.components["scheduler"].log()
    assert "Detected a task instance without a heartbeat" in scheduler_log, scheduler_log[-4000:]
    assert "is failed): withdrew" in scheduler_log, scheduler_log[-4000:]
    assert train_task(airflow, DAG_ID, run_id)["state"] == "failed"

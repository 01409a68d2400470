"""Kill and success under a real Airflow triggerer (part of ``make test``; ``GANG_STANDALONE=0`` skips it).

``dag.test()`` runs triggers inline, so the trigger's ``on_kill`` guard - it reads the task
instance state through the triggerer's supervisor channel, as cncf-kubernetes' KubernetesPodTrigger
does - only runs for real in a triggerer. These tests start Airflow's components (scheduler,
dag-processor, api-server, triggerer: what ``airflow standalone`` runs; LocalExecutor on sqlite) in a
temporary ``AIRFLOW_HOME`` on free loopback ports, plus two emulated clusters, and drive Airflow
through its REST API (``airflow-core/src/airflow/cli/commands/standalone_command.py``):

- ``test_mark_failed_while_reserving_deletes_the_gang``: the ``demo`` scenario, its clock standing
  still, keeps zone us-central1-a stocked out, so an 8-member gang waits in ``ReservationTrigger``;
  the task is marked failed through ``PATCH .../taskInstances/train``; the api-server's listener
  (``sweep.listener_actions``) or the trigger's ``on_kill``, whichever comes first, must delete every
  object of the gang (checked with kubectl) and log it. Before Airflow 3.3 the triggerer calls no
  ``on_kill`` (``BaseTrigger.on_kill`` is new in 3.3): the listener must do it alone.
- ``test_clear_while_reserving_leaves_one_gang``: the same, but the task is cleared
  (``POST .../clearTaskInstances``); try 2 adopts try 1's gang, try 1's ``on_kill`` keeps it (the
  state is not final, and try 2 marked the owner as its own; before 3.3 nothing is called), and
  marking try 2 failed deletes it.
- ``test_success_with_the_real_triggerer``: the ``small`` scenario on a manual clock, moved 30
  simulated seconds at a time once Airflow has settled; a 2-member gang defers to
  ``ReservationTrigger`` until reserved, then runs for 120 simulated seconds watched by
  ``GangRunTrigger``; both fire in the triggerer, the task succeeds and leaves nothing behind.

Run (about 2-3 minutes on 2 cores; needs ~2 GB of RAM)::

    .venv/bin/python -m pytest -p no:cacheprovider tests/standalone/test_real_triggerer.py -s

The DAG file, the clusters and Airflow come from :mod:`tests.standalone.environment`; every process
is started in its own session and stopped (with everything in that session) at the end.
``GANG_STANDALONE_KEEP=1`` keeps the temporary directory (logs, Airflow home) and prints its path.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from airflow.triggers.base import BaseTrigger

from airflow_provider_gang.reservation import naming
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from tests.standalone.clusters import kubectl, names
from tests.standalone.components import Airflow
from tests.standalone.environment import (
    WAITING_AND_FAST,
    Setup,
    drive_until_finished,
    running_airflow,
    train_task,
    trigger,
    waiting_and_fast,
)

pytestmark = pytest.mark.timeout(900)

GANG_KINDS = "provisioningrequests,podtemplates,pods,configmaps,services"
TRIGGERER_CALLS_ON_KILL = hasattr(BaseTrigger, "on_kill")
"""Airflow 3.3's triggerer calls a cancelled trigger's ``on_kill`` after a user action; 3.1's and
3.2's only cancel it (``airflow/jobs/triggerer_job_runner.py``)."""

DAGS = waiting_and_fast(
    file_name="gang_standalone_dags.py",
    description="DAGs of tests/standalone: one gang that waits (zone A stocked out), one that runs at once.",
    waiting="gang_standalone_waiting",
    success="gang_standalone_success",
    success_run_seconds=120,
)


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    with running_airflow("gang-standalone-", DAGS, WAITING_AND_FAST) as started:
        yield started


def _waiting(setup: Setup) -> ClusterHarness:
    return setup.clusters["gang_waiting"]


def _fast(setup: Setup) -> ClusterHarness:
    return setup.clusters["gang_fast"]


def _gang(dag_id: str, run_id: str, attempt: int) -> str:
    return naming.gang_name(dag_id, "train", run_id, attempt=attempt)


def _wait_deferred_with_request(setup: Setup, dag_id: str, run_id: str) -> str:
    """Wait until the try is deferred with its ProvisioningRequest pending; return the gang name."""
    airflow = setup.airflow
    eventually(
        lambda: train_task(airflow, dag_id, run_id)["state"] in ("deferred", "failed"),
        timeout=240,
        what="task deferred",
        interval=2,
    )
    assert train_task(airflow, dag_id, run_id)["state"] == "deferred", airflow.task_log(run_id)[-6000:]
    gang = _gang(dag_id, run_id, train_task(airflow, dag_id, run_id)["try_number"])
    selector = f"{naming.GANG_LABEL}={gang}"
    _wait_trigger_running(airflow, run_id, train_task(airflow, dag_id, run_id)["try_number"])
    objects = names(_waiting(setup), GANG_KINDS, selector)
    assert any(name.startswith("provisioningrequest") for name in objects), objects
    time.sleep(10)  # it really waits: still deferred, the request still pending
    assert train_task(airflow, dag_id, run_id)["state"] == "deferred"
    status = kubectl(
        _waiting(setup),
        "get",
        "provisioningrequests",
        "-n",
        "default",
        "-l",
        selector,
        "-o",
        'jsonpath={.items[*].status.conditions[?(@.type=="Provisioned")].status}',
    )
    assert status.strip() in ("", "False"), f"Provisioned={status!r}: zone A should still be stocked out"
    return gang


def _wait_trigger_running(airflow: Airflow, run_id: str, attempt: int) -> None:
    """Wait until the triggerer runs the try's trigger. Marking a task failed before that means no
    ``on_kill`` at all: the trigger row is removed before any triggerer started it (see the report)."""
    eventually(
        lambda: "waiting for the" in airflow.trigger_log(run_id, attempt),
        timeout=120,
        what="the trigger running",
        interval=1,
    )


def _report(setup: Setup, gang: str) -> None:
    lines = [line for line in setup.airflow.trigger_log().splitlines() if gang in line or "on_kill" in line]
    print("\n".join(lines[-15:]))


def test_mark_failed_while_reserving_deletes_the_gang(setup: Setup) -> None:
    dag_id = "gang_standalone_waiting"
    run_id = trigger(setup.airflow, dag_id)
    gang = _wait_deferred_with_request(setup, dag_id, run_id)
    setup.airflow.request(
        "PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/train", {"new_state": "failed"}
    )
    selector = f"{naming.GANG_LABEL}={gang}"
    try:
        eventually(
            lambda: names(_waiting(setup), GANG_KINDS, selector) == [],
            timeout=90,
            what="every gang object deleted",
            interval=2,
        )
    finally:
        _report(setup, gang)
    # Two deleters race on 3.3: the api-server's listener, as it applies the state, and the trigger's
    # on_kill once the triggerer cancels it; each deletion is idempotent, and whichever came says so.
    # The objects are gone before the deleter's log line is written: wait for the line too.
    withdrew = f"Gang clean-up (task instance {dag_id}/{run_id}/train is failed): withdrew"

    def said() -> tuple[bool, bool] | None:
        listener = withdrew in setup.airflow.component_log("api-server")
        on_kill = TRIGGERER_CALLS_ON_KILL and f"Gang {gang}: on_kill deleted" in setup.airflow.trigger_log()
        return (listener, on_kill) if listener or on_kill else None

    listener_withdrew, on_kill_deleted = eventually(said, timeout=30, what="the deleter's log line", interval=1)
    print(f"the listener withdrew the gang: {listener_withdrew}; on_kill deleted it: {on_kill_deleted}")
    assert listener_withdrew or on_kill_deleted
    assert train_task(setup.airflow, dag_id, run_id)["state"] == "failed"


def test_clear_while_reserving_leaves_one_gang(setup: Setup) -> None:
    """Clearing a deferred task: Airflow sets it to no state and the scheduler starts try 2 at once; the
    triggerer cancels try 1's trigger only once its trigger row is replaced. Whether try 2 has adopted
    try 1's gang by then or not (the order depends on load), try 1's ``on_kill`` reads a state that is
    not final and keeps the gang (``triggers.kill``), so exactly try 1's gang is left, owned by try 2,
    and marking try 2 failed deletes it."""
    dag_id = "gang_standalone_waiting"
    run_id = trigger(setup.airflow, dag_id)
    first = _wait_deferred_with_request(setup, dag_id, run_id)
    setup.airflow.request(
        "POST",
        f"/api/v2/dags/{dag_id}/clearTaskInstances",
        {"dry_run": False, "dag_run_id": run_id, "task_ids": ["train"], "only_failed": False, "reset_dag_runs": True},
    )
    eventually(
        lambda: (
            train_task(setup.airflow, dag_id, run_id)["try_number"] == 2
            and train_task(setup.airflow, dag_id, run_id)["state"] == "deferred"
        ),
        timeout=240,
        what="try 2 deferred",
        interval=2,
    )
    _wait_trigger_running(setup.airflow, run_id, 2)
    decided = (f"Gang {first}: not deleting", f"Gang {first}: task instance state is")
    if TRIGGERER_CALLS_ON_KILL:
        eventually(
            lambda: any(line in setup.airflow.trigger_log() for line in decided),
            timeout=90,
            what="try 1's on_kill to decide",
            interval=2,
        )
    _report(setup, first)
    adopted = f"adopting gang {first}" in setup.airflow.task_log(run_id)
    gangs = {
        gang: names(_waiting(setup), GANG_KINDS, f"{naming.GANG_LABEL}={gang}")
        for gang in (first, _gang(dag_id, run_id, 2))
    }
    print(f"try 2 adopted try 1's gang: {adopted}; objects per gang: {gangs}")
    assert adopted and gangs[first] and not gangs[_gang(dag_id, run_id, 2)], gangs
    assert (f"Gang {first}: not deleting" in setup.airflow.trigger_log()) is TRIGGERER_CALLS_ON_KILL
    setup.airflow.request(
        "PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/train", {"new_state": "failed"}
    )
    for gang in gangs:
        eventually(
            lambda gang=gang: names(_waiting(setup), GANG_KINDS, f"{naming.GANG_LABEL}={gang}") == [],
            timeout=90,
            what=f"{gang}'s objects deleted",
            interval=2,
        )


def test_success_with_the_real_triggerer(setup: Setup) -> None:
    dag_id = "gang_standalone_success"
    run_id = trigger(setup.airflow, dag_id)
    fast = _fast(setup)
    assert fast.served is None  # on the manual clock, in this process
    eventually(
        lambda: train_task(setup.airflow, dag_id, run_id)["state"] in ("deferred", "failed"),
        timeout=240,
        what="deferred",
        interval=1,
    )
    drive_until_finished(setup.airflow, fast, {run_id: dag_id})
    task = train_task(setup.airflow, dag_id, run_id)
    assert task["state"] == "success", setup.airflow.task_log(run_id)[-6000:]
    gang = _gang(dag_id, run_id, task["try_number"])
    assert names(_fast(setup), GANG_KINDS, f"{naming.GANG_LABEL}={gang}") == []
    _report(setup, gang)
    # The reservation trigger fired (the worker resumed in execute_reserved and launched the members);
    # its triggerer log is gone: the run trigger of the same attempt writes the same log file anew.
    task_log = setup.airflow.task_log(run_id)
    assert task_log.count("Pausing task as DEFERRED") == 2, task_log[-4000:]
    assert f"Gang {gang}: launched 2 members together" in task_log, task_log[-4000:]
    trigger_log = setup.airflow.trigger_log(run_id)
    assert f"Gang {gang}: succeeded (all_succeeded)" in trigger_log, trigger_log[-4000:]

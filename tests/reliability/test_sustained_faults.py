"""Sustained faults: for a whole task, 5 % of requests answered 500 and 5 % 429 (with ``Retry-After:
1``), every request delayed 50 ms, and every watch that resumes from a resourceVersion answered 410
Expired - still every run completes, with at most ``MAX_REQUEST_RATIO`` times the requests of a
clean run of the same thing.

The spec is ``FAULTS``. Its ``watch-expire:1.0`` hits every WATCH that carries a resourceVersion
(``gang_sim.apiserver.http.faults``): the resume after a cut and the watch opened right after each LIST alike. So no
watch of the provider ever streams (``watch-cut:2`` finds none to cut) and the triggers follow the
cluster through LISTs only - the harshest reading of "410 on resume". Watches that do stream, are cut
and resume into a compacted history are the long-runs scenario's (``test_long_runs``).

Proven:

- the example DAG (``dags/gang_nightly_training.py`` on the ``demo`` cluster at the demo's time scale:
  try 1 waits out zone A's stock-out, try 2 asks zone B for eight members, try 3 - if zone B had no
  room in time - shrinks to four; real torch DDP members) ends ``success`` with no pod left, every
  try recorded, the ladder followed, no duplicate or orphan object, and at most
  ``MAX_REQUEST_RATIO`` times the requests of a clean run. Whether try 2 gets zone B depends on how
  long Airflow took to start try 1 (zone B has room for eight only once its idle spot node is scaled
  down, about ten simulated minutes in, and the autoscaler retries the request with backoff), so the
  two runs may take two and three tries: the bound holds either way (three faulted tries made about
  2x the requests of two clean ones);
- each reservation mode (simulated members running ``MEMBER_RUN_SECONDS``) likewise: one try, all
  members succeeded, every invariant of ``harness.check``, at most ``MAX_REQUEST_RATIO`` times the
  requests of its clean run.

The request ratio is what catches a retry or relist loop: before the reflector backed off between
410s that follow each other with no event in between, its LIST + WATCH loop ran once per round trip
for as long as a trigger waited - 3.7x the clean run's requests for the example DAG and 4.1x for
``kueue`` when measured; with the backoff, about 1.6x for each.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch  # noqa: F401  # the example DAG's members import it: a test dependency, so a broken install fails here

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import RetryAsIs
from demo.cluster import CONN_ID
from demo.runner import DEMO_DAG_ID, DEMO_TIME_SCALE, demo_scenario, run_example_dag
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_modes import kueue_queues
from tests.reliability.conftest import FaultCluster, report
from tests.reliability.harness import TaskRun, check, dag_run_ids, dag_task_run, run_task

DAGS = Path(__file__).resolve().parents[2] / "dags"
FAULTS = "*:0.05:500,*:0.05:429,watch-cut:2,watch-expire:1.0,latency:0.05,seed:{seed}"
MAX_REQUEST_RATIO = 3.0
MODES = ("provisioning_request", "gates", "kueue")
MODE_TIME_SCALE = 60.0
MEMBER_RUN_SECONDS = 5.0
"""Wall-clock run time of each simulated member: several 2 s watch cuts (``run-seconds`` is simulated)."""


def injected(cluster: FaultCluster) -> int:
    return sum(1 for entry in cluster.control.requests() if entry["injected"])


def path_of(run: TaskRun) -> list[tuple[str, str]]:
    return [(record.step, record.outcome) for record in run.records]


# -- the example DAG -------------------------------------------------------------------------------


def run_the_example_dag(factory: Any, faults: str | None) -> tuple[FaultCluster, TaskRun, int]:
    """The example DAG once, as ``make demo`` runs it, on a fresh ``demo`` cluster with ``faults``;
    returns the cluster, how the task ended and the number of API requests the run made."""
    cluster = factory(demo_scenario(), time_scale=DEMO_TIME_SCALE)
    cluster.control.requests(clear=True)
    if faults:
        cluster.control.set_faults(faults)
    before = dag_run_ids(DEMO_DAG_ID)
    state, _ = run_example_dag(DAGS, time_scale=DEMO_TIME_SCALE)
    cluster.control.clear_faults()
    (run_id,) = dag_run_ids(DEMO_DAG_ID) - before
    run = dag_task_run(DEMO_DAG_ID, run_id)
    assert run.context["state"] == state
    return cluster, run, len(cluster.control.requests())


@pytest.mark.timeout(900)
def test_the_example_dag_completes_under_sustained_faults_within_3x_the_requests(
    fault_cluster_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # the members
    clean_cluster, clean, clean_requests = run_the_example_dag(fault_cluster_factory, None)
    assert clean.outcome == "success", clean.context
    report("clean run (example DAG)", check(clean, clean_cluster.ledger), faults=0)

    cluster, run, requests = run_the_example_dag(fault_cluster_factory, FAULTS.format(seed=7))
    assert run.outcome == "success", (run.context, [record.to_dict() for record in run.records])
    verdict = check(run, cluster.ledger)
    assert cluster.cluster.objects("v1/pods") == []
    report("sustained faults (example DAG)", verdict, faults=injected(cluster))
    assert requests <= MAX_REQUEST_RATIO * clean_requests, (requests, clean_requests, path_of(clean), path_of(run))


# -- every reservation mode ------------------------------------------------------------------------


def run_a_gang(factory: Any, mode: str, faults: str | None) -> tuple[FaultCluster, TaskRun, int]:
    cluster = factory("small", time_scale=MODE_TIME_SCALE)
    extra: dict[str, Any] = {}
    if mode == "kueue":
        kueue_queues(cluster.cluster, {"team": 8})
        extra["kueue_queue"] = "team"
    operator = GangTrainingOperator(
        task_id="train",
        size=2,
        gpus=1,
        pod_template=simulated_pod(MEMBER_RUN_SECONDS * MODE_TIME_SCALE),
        reservation=mode,
        distributed="torch",
        deferrable=True,
        retries=1,
        fallbacks=[RetryAsIs()],
        kubernetes_conn_id=CONN_ID,
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=60),
        **extra,
    )
    cluster.control.requests(clear=True)
    if faults:
        cluster.control.set_faults(faults)
    run = run_task(operator, f"sustained_{mode}_{'faults' if faults else 'clean'}")
    cluster.control.clear_faults()
    return cluster, run, len(cluster.control.requests())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_completes_under_sustained_faults_within_3x_the_requests(
    fault_cluster_factory: Any, mode: str
) -> None:
    clean_cluster, clean, clean_requests = run_a_gang(fault_cluster_factory, mode, None)
    assert path_of(clean) == [("as configured", "all_succeeded")], clean.error
    report(f"clean run ({mode})", check(clean, clean_cluster.ledger), faults=0)

    cluster, run, requests = run_a_gang(fault_cluster_factory, mode, FAULTS.format(seed=MODES.index(mode)))
    assert run.outcome == "success", (run.error, [record.to_dict() for record in run.records])
    assert path_of(run) == path_of(clean)
    report(f"sustained faults ({mode})", check(run, cluster.ledger), faults=injected(cluster))
    assert requests <= MAX_REQUEST_RATIO * clean_requests, (requests, clean_requests)

"""Long runs: a gang that runs for many watch timeouts and client timeouts, with its watches cut
every second and its resumes answered 410, is never declared lost.

Each reservation mode runs a gang of two simulated members for ``RUN_SECONDS`` of wall-clock time.
The run trigger is rebuilt from ``serialize()`` (as a triggerer builds it) with a short
``watch_timeout_seconds`` and ``client_options.request_timeout``, so the run lasts many times both.
Throughout the task the emulator cuts every watch after 1 s (``watch-cut:1``), answers a share of
the watches that carry a resourceVersion with 410 Expired (``watch-expire``), and keeps only a tiny
watch history (``history_limit``) while another client writes a ConfigMap several times a second,
so most resumes after a cut find their resourceVersion compacted and get 410 from the history
itself. Proven per mode: the task succeeds at its first and only try with ``all_succeeded`` (a try
declared ``member_lost`` - or anything else - would fail the task: no retries); the run stage did
last at least ``RUN_SECONDS``, ten watch timeouts and twenty client timeouts; the other client kept
writing meanwhile; the run trigger's member reflector reconnected after at least ``MIN_RECONNECTS``
cuts and relisted after at least ``MIN_RELISTS`` 410s; and no invariant of ``harness.check`` is
broken. (Measured: about 20 cuts and 20 relists per reflector in a 21 s run stage.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from demo.cluster import CONN_ID
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_modes import kueue_queues
from tests.reliability.conftest import report
from tests.reliability.emulator_side import BackgroundWrites
from tests.reliability.harness import RecordingTriggerRunner, check, run_task

MODES = ("provisioning_request", "gates", "kueue")
TIME_SCALE = 60.0
RUN_SECONDS = 20.0
"""Wall-clock run time of every member (``sim.gang.dev/run-seconds`` is simulated: times TIME_SCALE)."""
WATCH_TIMEOUT_SECONDS = 2
REQUEST_TIMEOUT = 1.0
FAULTS = "watch-cut:1,watch-expire:0.2,seed:{seed}"
HISTORY_LIMIT = 2
WRITE_INTERVAL = 0.25
MIN_RECONNECTS = 10
MIN_RELISTS = 3


def short_timeouts(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The run trigger with short watches and a short client timeout; the reservation trigger as is."""
    if cls is GangRunTrigger:
        kwargs["watch_timeout_seconds"] = WATCH_TIMEOUT_SECONDS
        kwargs["client_options"] = {**kwargs["client_options"], "request_timeout": REQUEST_TIMEOUT}
    return kwargs


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", MODES)
def test_a_long_run_through_cut_and_expired_watches_is_never_declared_lost(
    fault_cluster_factory: Any, mode: str
) -> None:
    cluster = fault_cluster_factory("small", time_scale=TIME_SCALE, history_limit=HISTORY_LIMIT)
    extra: dict[str, Any] = {}
    if mode == "kueue":
        kueue_queues(cluster.cluster, {"team": 8})
        extra["kueue_queue"] = "team"
    operator = GangTrainingOperator(
        task_id="train",
        size=2,
        gpus=1,
        pod_template=simulated_pod(RUN_SECONDS * TIME_SCALE),
        reservation=mode,
        distributed="torch",
        deferrable=True,
        retries=0,
        kubernetes_conn_id=CONN_ID,
        reservation_timeout=timedelta(seconds=60),
        startup_timeout=timedelta(seconds=60),
        **extra,
    )
    runner = RecordingTriggerRunner(changes=short_timeouts, timeout=RUN_SECONDS + 120)
    cluster.control.requests(clear=True)
    cluster.control.set_faults(FAULTS.format(seed=MODES.index(mode)))
    with BackgroundWrites(cluster.cluster, WRITE_INTERVAL) as writes:
        run = run_task(operator, f"long_run_{mode}", run_trigger=runner)
    cluster.control.clear_faults()
    expired = sum(1 for entry in cluster.control.requests() if entry["injected"] == "watch-expire")

    assert [record.outcome for record in run.records] == ["all_succeeded"], [r.to_dict() for r in run.records]
    assert run.outcome == "success", run.error
    assert writes.count >= RUN_SECONDS / WRITE_INTERVAL / 2, writes.count  # the history kept being compacted
    (stage,) = runner.of_class(GangRunTrigger)
    assert stage.payload["reason"] == "all_succeeded", stage.payload
    assert stage.seconds >= max(RUN_SECONDS, 10 * WATCH_TIMEOUT_SECONDS, 20 * REQUEST_TIMEOUT), stage.seconds
    (members,) = [reflector for reflector in stage.trigger.reflectors if reflector.resource == PODS]
    assert members.stats.reconnects >= MIN_RECONNECTS, members.stats
    assert members.stats.relists >= MIN_RELISTS, members.stats
    cuts = sum(reflector.stats.reconnects for item in runner.runs for reflector in item.trigger.reflectors)
    relists = sum(reflector.stats.relists for item in runner.runs for reflector in item.trigger.reflectors)
    report(f"long runs ({mode})", check(run, cluster.ledger), faults=cuts + max(relists, expired))

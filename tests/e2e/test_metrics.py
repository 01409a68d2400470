"""Every finished try sends its metrics through Airflow's ``Stats`` (``operators.metrics``), to
wherever the user's ``[metrics]`` section points: here a real UDP StatsD listener on loopback.

Airflow reads ``[metrics]`` when the stats backend is built; the task runner builds it with
``stats.initialize(factory=stats_utils.get_stats_factory(), ...)`` before it runs a task
(``airflow/sdk/execution_time/task_runner.py`` ``main()``), which ``dag.test()`` does not run - so
the fixture does what the task runner does, after setting the configuration in the environment.
InfluxDB-style tags (``statsd_influxdb_enabled``) put the tags on the wire, so they can be read.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import statsd  # noqa: F401  # Airflow's StatsD backend needs it: the test extra installs it

from airflow_provider_gang.operators import metrics
from airflow_provider_gang.reservation.fallback import ShrinkTo
from airflow_provider_gang.reservation.phases import Reason
from gang_sim.testing.eventually import eventually
from tests.e2e.gang_dags import gang_dag, simulated_pod, task_instance


class StatsdListener:
    """Collects StatsD datagrams sent to ``127.0.0.1:<port>`` (``name[,tag=value...]:value|type``)."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.1)
        self.port = self.socket.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.socket.recv(65536)
            except TimeoutError:
                continue
            self.lines.extend(data.decode().splitlines())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.socket.close()

    def metrics(self, name: str) -> list[tuple[dict[str, str], float, str]]:
        """``(tags, value, type)`` of every datagram of metric ``name`` (prefix included)."""
        found = []
        for line in list(self.lines):
            head, _, rest = line.partition(":")
            stat, *tag_items = head.split(",")
            if stat != name:
                continue
            value, _, kind = rest.partition("|")
            found.append((dict(item.split("=", 1) for item in tag_items), float(value), kind.split("|")[0]))
        return found

    def wait_for(self, name: str, count: int, timeout: float = 5.0) -> list[tuple[dict[str, str], float, str]]:
        eventually(
            lambda: len(self.metrics(name)) >= count, timeout=timeout, what=f"{count} {name} metrics", interval=0.02
        )
        return self.metrics(name)


@pytest.fixture
def statsd_listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[StatsdListener]:
    from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    listener = StatsdListener()
    for key, value in {
        "STATSD_ON": "True",
        "STATSD_HOST": "127.0.0.1",
        "STATSD_PORT": str(listener.port),
        "STATSD_PREFIX": "airflow",
        "STATSD_INFLUXDB_ENABLED": "True",
    }.items():
        monkeypatch.setenv(f"AIRFLOW__METRICS__{key}", value)
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
    try:
        yield listener
    finally:
        stats.initialize(factory=NoStatsLogger, export_legacy_names=False)
        listener.close()


def test_a_successful_try_sends_its_outcome_stage_times_and_gpu_seconds(
    cluster_factory: Any, run_dag: Any, statsd_listener: StatsdListener
) -> None:
    cluster_factory("small", time_scale=60)
    dag = gang_dag("metrics_success", size=2, gpus=1, pod_template=simulated_pod(60), deferrable=True)
    assert task_instance(run_dag(dag)).state == "success"
    ((tags, value, kind),) = statsd_listener.wait_for("airflow.gang.try.outcome", 1)
    assert (value, kind) == (1.0, "c")
    assert tags == {
        "mode": "provisioning_request",
        "reason": "all_succeeded",
        "step": "as_configured",
        "status": "success",
    }
    for stage in ("reservation_wait", "launch", "run"):
        ((stage_tags, milliseconds, stage_kind),) = statsd_listener.metrics(f"airflow.gang.try.{stage}_ms")
        assert stage_kind == "ms" and stage_tags["reason"] == "all_succeeded"
        assert 0 <= milliseconds < 60_000, (stage, milliseconds)
    ((_, run_ms, _),) = statsd_listener.metrics("airflow.gang.try.run_ms")
    assert run_ms >= 500  # 60 simulated seconds at 60x: about a wall second of running
    gpu = {
        name: statsd_listener.metrics(f"airflow.gang.try.{name}_gpu_seconds")[0][1]
        for name in ("reserved", "used", "idle")
    }
    assert gpu["used"] > 0 and gpu["reserved"] >= gpu["used"]
    assert abs(gpu["reserved"] - gpu["used"] - gpu["idle"]) <= 1  # whole seconds, each rounded
    assert statsd_listener.metrics("airflow.gang.try.fallback_step") == []  # ran as configured


def test_failed_tries_send_their_reason_and_the_fallback_step_the_next_one_took(
    cluster_factory: Any, run_dag: Any, statsd_listener: StatsdListener
) -> None:
    cluster_factory("small", time_scale=60)
    dag = gang_dag(
        "metrics_failure",
        size=2,
        min_size=1,
        gpus=1,
        retries=1,
        deferrable=True,
        pod_template=simulated_pod(10, exit_code=3),
        fallbacks=[ShrinkTo(1, applies_to=frozenset({Reason.MEMBER_FAILED}))],
    )
    assert task_instance(run_dag(dag)).state == "failed"
    outcomes = statsd_listener.wait_for("airflow.gang.try.outcome", 2)
    assert sorted((tags["reason"], tags["status"], tags["step"]) for tags, _, _ in outcomes) == [
        ("member_failed", "failure", "as_configured"),
        ("member_failed", "failure", "shrink_to_1_members"),
    ]
    ((tags, value, _),) = statsd_listener.metrics("airflow.gang.try.fallback_step")
    assert value == 1.0
    assert tags == {
        "mode": "provisioning_request",
        "reason": "member_failed",
        "step": "shrink_to_1_members",
        "step_index": "0",
    }
    assert len(statsd_listener.metrics("airflow.gang.try.reserved_gpu_seconds")) == 2  # once per try
    for old in metrics.RENAMED:  # the names docs/metrics.md lists as renamed
        assert statsd_listener.metrics(f"airflow.{old}") == [], f"{old} is still sent"

"""Metrics of a finished try, sent once through Airflow's ``Stats`` when the try is recorded.

Airflow 3.3's metrics facade for task code is ``airflow.sdk.observability.stats`` (``airflow.stats``
is a deprecated shim of it, ``airflow/stats.py``); ``airflow_compat`` finds it, or the ``Stats``
class of 3.1 and 3.2. The task runner initializes it from the user's
``[metrics]`` section - StatsD, Datadog or OpenTelemetry, or nothing - before it runs a task
(``stats.initialize(factory=stats_utils.get_stats_factory(), ...)`` in
``airflow/sdk/execution_time/task_runner.py`` ``main()``); this module only calls it, so metrics go
wherever the user configured them, under the user's ``statsd_prefix`` (default ``airflow``).

:func:`emit_try` is called by ``operators.lifecycle.TryLifecycle.end`` once per try, when its record
is first written. Every name ends in its unit (``_ms``: a timer in milliseconds, as StatsD and
Airflow's OpenTelemetry timers record them; ``_gpu_seconds``: a counter of GPU-seconds; none: a
count), ``<prefix>.`` prepended by the backend; their tags:

========================================  ========  ==============================================
``gang.try.outcome``                       counter   1 per try; tags ``mode``, ``reason``, ``step``,
                                                     ``status`` (``success`` | ``failure``)
``gang.try.reservation_wait_ms``           timer     reservation requested -> granted (``queue_seconds``)
``gang.try.launch_ms``                     timer     members launched -> all running
``gang.try.run_ms``                        timer     all running -> ended
``gang.try.reserved_gpu_seconds``          counter   GPU-seconds held by the try (``reservation.cost``),
``gang.try.used_gpu_seconds``              counter   ... of them used by running members,
``gang.try.idle_gpu_seconds``              counter   ... of them idle; divide by 3600 for GPU-hours
``gang.try.fallback_step``                 counter   1 per try that ran a fallback step (not the
                                                     configured gang); tags ``mode``, ``step``,
                                                     ``step_index``, ``reason``
========================================  ========  ==============================================

:data:`RENAMED` maps the names before units were part of them (``gang.try.reservation_wait``,
``gang.try.gpu_seconds_reserved``...) to these; a dashboard reading the old names must be changed.

Timers and GPU counters carry the tags ``mode``, ``reason``, ``step``. A timer of a stage the try
never reached is not sent. GPU-seconds are whole numbers because counters are integers in the
facade's signature (``stats.incr(stat, count: int)``). Tag values are normalized to the characters
StatsD names accept (``[A-Za-z0-9_.-]``, others become ``_``): ``shrink to 2 members`` is sent as
``shrink_to_2_members``. Sending never fails a try: an error is logged and the try goes on.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from airflow_provider_gang import airflow_compat as stats
from airflow_provider_gang.reservation.records.tries import TryRecord

log = logging.getLogger(__name__)

PREFIX = "gang.try"
TIMERS = {"reservation_wait": "reservation_wait_ms", "launch": "launch_ms", "run": "run_ms"}
"""Stage -> timer name (milliseconds)."""
GPU_COUNTERS = {"reserved": "reserved_gpu_seconds", "used": "used_gpu_seconds", "idle": "idle_gpu_seconds"}
"""What the GPU-seconds were spent on -> counter name."""
RENAMED = {
    **{f"{PREFIX}.{stage}": f"{PREFIX}.{name}" for stage, name in TIMERS.items()},
    **{f"{PREFIX}.gpu_seconds_{spent}": f"{PREFIX}.{name}" for spent, name in GPU_COUNTERS.items()},
}
"""Old metric name -> the name it is sent under now (the list of renamed metrics in docs/metrics.md)."""


def tag_value(value: object) -> str:
    """``value`` as a tag StatsD and InfluxDB line tags accept (module docstring)."""
    return stats.normalize_stat_name(str(value))


def try_tags(record: TryRecord) -> dict[str, str]:
    """``mode``, ``reason`` and ``step`` of ``record``, normalized."""
    return {"mode": tag_value(record.mode), "reason": tag_value(record.outcome), "step": tag_value(record.step)}


def emit_try(record: TryRecord, *, succeeded: bool) -> None:
    """Send the metrics of one finished try (module docstring); never raises an ``Exception``."""
    try:
        _emit(record, succeeded=succeeded)
    except Exception as error:  # metrics are an aside: a broken backend must not fail the try
        log.warning("Could not send the metrics of try %d of gang %s: %s", record.attempt, record.gang, error)


def _emit(record: TryRecord, *, succeeded: bool) -> None:
    tags = try_tags(record)
    stats.incr(f"{PREFIX}.outcome", tags={**tags, "status": "success" if succeeded else "failure"})
    stages = {
        "reservation_wait": record.queue_seconds,
        "launch": record.provisioning_seconds,
        "run": record.run_seconds,
    }
    for stage, seconds in stages.items():
        if seconds is not None:
            stats.timing(f"{PREFIX}.{TIMERS[stage]}", timedelta(seconds=seconds), tags=tags)
    gpu_seconds = {
        "reserved": record.gpu_seconds_reserved,
        "used": record.gpu_seconds_used,
        "idle": record.gpu_seconds_idle,
    }
    for spent, value in gpu_seconds.items():
        stats.incr(f"{PREFIX}.{GPU_COUNTERS[spent]}", count=round(value), tags=tags)
    if record.step_index is not None:
        stats.incr(f"{PREFIX}.fallback_step", tags={**tags, "step_index": str(record.step_index)})

"""What the provider uses of Airflow that moved between the releases it supports (3.1, 3.2, 3.3).

Each name is found by feature detection (the newest location first), never by parsing a version:

============================  ==========================================  =========================
what                          3.2 and 3.3                                 3.1
============================  ==========================================  =========================
the exceptions below          ``airflow.sdk.exceptions``                  ``airflow.exceptions``
:data:`conf`                  ``airflow.sdk.configuration.conf``          ``airflow.configuration.conf``
:func:`incr`, :func:`timing`  3.3: ``airflow.sdk.observability.stats``    ``airflow.stats.Stats``
                              functions; 3.2: its ``Stats`` class
============================  ==========================================  =========================

The task state store (3.3 only) is detected on the task's context instead: ``operators.try_history``.
``airflow.providers.common.compat.sdk`` maps the same names for Airflow's own providers, but its map
changes with each common-compat release; these three are all this provider needs.
"""

from __future__ import annotations

import importlib
import re
from datetime import timedelta
from typing import Any

try:
    from airflow.sdk.configuration import conf
except ImportError:  # Airflow 3.1
    from airflow.configuration import conf
try:
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowTaskTerminated,
        AirflowTaskTimeout,
        TaskDeferred,
    )
except ImportError:  # Airflow 3.1: the task runner raises and catches these very classes
    from airflow.exceptions import (  # type: ignore[no-redef,attr-defined]
        AirflowException,
        AirflowFailException,
        AirflowTaskTerminated,
        AirflowTaskTimeout,
        TaskDeferred,
    )

try:
    from airflow.sdk.exceptions import AirflowNotFoundException
except ImportError:  # Airflow 3.1: connections not found raise the core class
    from airflow.exceptions import AirflowNotFoundException  # type: ignore[no-redef,attr-defined]

__all__ = [
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowTaskTerminated",
    "AirflowTaskTimeout",
    "TaskDeferred",
    "conf",
    "incr",
    "normalize_stat_name",
    "timing",
]

_INVALID_STAT_CHARACTERS = re.compile(r"[^a-zA-Z0-9_.-]")


def _stats() -> Any:
    """Airflow's metrics facade, looked up at call time: the task runner initializes it before the
    task runs (3.3: ``stats.initialize`` in ``airflow/sdk/execution_time/task_runner.py``), and the
    3.1/3.2 ``Stats`` class builds its backend on first attribute access."""
    try:
        module = importlib.import_module("airflow.sdk.observability.stats")
    except ImportError:  # Airflow 3.1
        return importlib.import_module("airflow.stats").Stats
    return module if hasattr(module, "incr") else module.Stats  # 3.3 functions, 3.2 class


def incr(name: str, count: int = 1, *, tags: dict[str, str] | None = None) -> None:
    """Add ``count`` to the counter ``name`` (``<prefix>.`` prepended by the backend)."""
    _stats().incr(name, count, tags=tags)


def timing(name: str, elapsed: timedelta, *, tags: dict[str, str] | None = None) -> None:
    """Send one timer value."""
    _stats().timing(name, elapsed, tags=tags)


def normalize_stat_name(value: str) -> str:
    """``value`` with every character StatsD names refuse replaced by ``_`` - the rule of 3.2's and
    3.3's ``normalize_name_for_stats`` (``airflow/sdk/_shared/observability/metrics/stats.py``),
    which 3.1 does not have."""
    return _INVALID_STAT_CHARACTERS.sub("_", value)

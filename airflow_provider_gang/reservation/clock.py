"""The one time source of the operator and the triggers: what they pass as ``now`` to the core.

The core's decisions take ``now`` as a parameter (``decision.decide(observed, now=, policy=)``,
``fallback``, ``cost``); the edges that call them read it here, through :func:`current`, and never
from ``time.time()`` themselves. In production that is :class:`SystemClock`, the UNIX time of the
machine. Tests install a clock that follows a simulated cluster (:func:`install`), so a
reservation deadline, a start-up timeout and a heartbeat are decided in the same time the
simulated controllers provision and run in, as Kueue's controllers take an injected clock
(``k8s.io/utils/clock``, ``pkg/controller/jobs/job/job_controller.go`` in kubernetes-sigs/kueue).

The clock is per process and not part of any stored format: a trigger rebuilt in a triggerer
reads that process's clock, the system clock for a real one. A DAG author never sees it.

Times are UNIX seconds (floats), the unit of the triggers' ``deadline`` and ``started_at``.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """What the operator and the triggers ask of a time source."""

    def now(self) -> float:
        """The current time, UNIX seconds."""

    def real_seconds(self, seconds: float) -> float:
        """How long to wait in real time for ``seconds`` of this clock to pass, or less: a waiter
        reads :meth:`now` again afterwards and waits again if the moment has not come."""


class SystemClock:
    """The machine's UNIX time (``time.time``), which real time passes at."""

    def now(self) -> float:
        return time.time()

    def real_seconds(self, seconds: float) -> float:
        return max(seconds, 0.0)


_current: Clock = SystemClock()


def current() -> Clock:
    """The clock of this process: :class:`SystemClock` unless a test installed another."""
    return _current


def install(clock: Clock) -> Clock:
    """Make ``clock`` the clock of this process; return the one it replaces, to be reinstalled."""
    global _current
    previous, _current = _current, clock
    return previous

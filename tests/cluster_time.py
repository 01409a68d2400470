"""The operator's and the triggers' clock (``reservation.clock``) following a simulated cluster's.

A test that installs :class:`ClusterTime` has one time for everything: the reservation deadline a
trigger decides, the start-up timeout, the heartbeat and the controllers' provisioning delays are
all simulated seconds of the emulator's clock (``gang_sim.world.clock``). On a ``ManualClock`` nothing
times out until the test advances it; on a ``ScaledClock`` a 5-minute timeout means 5 simulated
minutes, as the scenario's delays do, however long Airflow itself takes in real time.

Simulated second 0 is the UNIX time at which the adapter is made, so the times the operator stores
stay plausible UNIX times. Object timestamps written by the emulator (``creationTimestamp``, a
pod's ``startTime``) stay wall-clock times (``gang_sim.world.clock``), so GPU-seconds computed from them
mix the two times; tests that compare GPU-seconds keep the system clock.

Reading the emulator's clock from the test's thread is safe: ``ManualClock.now`` reads one float,
``ScaledClock.now`` the monotonic clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from airflow_provider_gang.reservation import clock
from gang_sim.testing.eventually import eventually_async
from gang_sim.world.clock import Clock as SimulatedClock
from gang_sim.world.clock import ManualClock, ScaledClock

MANUAL_POLL_SECONDS = 0.02
"""How often a waiter looks at a ManualClock again: it moves only when the test advances it."""


class ClusterTime:
    """``reservation.clock.Clock`` reading ``simulated`` (the emulator's clock)."""

    def __init__(self, simulated: SimulatedClock) -> None:
        self.simulated = simulated
        self.origin = time.time() - simulated.now()
        self.reads = 0
        """How often :meth:`now` was called: a trigger reads it on every pass of its wait, so a test
        that waits for more reads after a change (a write, an advance) knows the trigger has decided
        on it (:meth:`read_again`), with no sleep."""

    def now(self) -> float:
        self.reads += 1
        return self.origin + self.simulated.now()

    async def read_again(self, times: int = 10, timeout: float = 10.0) -> None:
        """Wait until :meth:`now` has been called ``times`` more times. A waiting trigger reads it
        three times per pass of its wait (``triggers.wakeups``) and once per decision; ten reads
        cover the rest of the pass it is in, then a whole pass with its decision and log lines."""
        target = self.reads + times
        await eventually_async(lambda: self.reads >= target, timeout=timeout, what=f"{times} reads of the clock")

    def real_seconds(self, seconds: float) -> float:
        seconds = max(seconds, 0.0)
        if isinstance(self.simulated, ScaledClock):
            return seconds / self.simulated.time_scale
        if isinstance(self.simulated, ManualClock):
            return min(seconds, MANUAL_POLL_SECONDS)
        raise TypeError(f"no real-time rate for {type(self.simulated).__name__}")


@contextmanager
def on_cluster_time(simulated: SimulatedClock) -> Iterator[ClusterTime]:
    """Install a :class:`ClusterTime` of ``simulated`` for the block, then the previous clock again."""
    installed = ClusterTime(simulated)
    previous = clock.install(installed)
    try:
        yield installed
    finally:
        clock.install(previous)


class Advancing(Protocol):
    """What :func:`running_from` needs of a cluster harness on a ``ManualClock``."""

    def advance(self, seconds: float, timeout: float = 60.0) -> float: ...


STEP_SECONDS = 0.1
"""Real seconds between two steps of :func:`running_from`."""


@contextmanager
def running_from(harness: Advancing, started: Callable[[], bool], *, time_scale: float) -> Iterator[None]:
    """Hold a cluster's ``ManualClock`` at 0 until ``started()`` (e.g. the task's first request
    exists), then run it ``time_scale`` times faster than real time, a step every
    :data:`STEP_SECONDS` (``ManualClock.run_for``, deadline by deadline), until the block ends.

    On a ``ScaledClock`` simulated time runs from the cluster's start, so how long Airflow takes to
    parse and start a DAG decides which deadlines the scenario's events beat; held at 0 until the
    first request, a scenario plays the same way however loaded the machine is.
    """
    stop = threading.Event()

    def drive() -> None:
        while not stop.is_set() and not started():
            stop.wait(STEP_SECONDS / 2)
        while not stop.wait(STEP_SECONDS):
            harness.advance(STEP_SECONDS * time_scale)

    driver = threading.Thread(target=drive, name="cluster-time", daemon=True)
    driver.start()
    try:
        yield
    finally:
        stop.set()
        driver.join(timeout=30)

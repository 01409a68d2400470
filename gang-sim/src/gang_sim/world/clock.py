"""Simulated time for the emulator's controllers.

Every controller delay (cluster-autoscaler scan interval, ProvisioningRequest backoff, booking time,
Kueue retry backoff, waitForPodsReady, node provisioning, simulated container run time) is expressed
in *simulated seconds* and measured against one injected :class:`Clock`:

- :class:`ScaledClock` runs simulated time ``time_scale`` times faster than the wall clock
  (``gang-sim serve --time-scale 60`` turns the 10 minute booking window into 10 real seconds).
- :class:`ManualClock` only moves when a test calls :meth:`ManualClock.advance`; sleepers whose
  deadline has been reached wake up in deadline order.

Object timestamps (``creationTimestamp``, ``lastTransitionTime``) stay wall-clock times; controllers
keep the simulated instants they need (for example when a request became Provisioned) in memory, as
the real cluster-autoscaler keeps its backoff state in an in-memory cache.

Simulated time starts at 0.0 when the clock is created. Both clocks must be used from the event loop
that runs the controllers (the Store has one loop and no threads).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable


class Clock(ABC):
    """The time source shared by all simulated controllers."""

    @abstractmethod
    def now(self) -> float:
        """Simulated seconds since the clock started."""

    @abstractmethod
    def sleep(self, seconds: float) -> Awaitable[None]:
        """Wait ``seconds`` of simulated time (non-positive values just yield to the loop).

        Use as ``await clock.sleep(s)``. A :class:`ManualClock` registers the sleeper when ``sleep`` is
        *called*, not when the awaitable first runs, so ``asyncio.ensure_future(clock.sleep(s))`` is
        visible to :meth:`ManualClock.next_deadline` at once.
        """

    def describe(self) -> dict[str, object]:
        """A JSON-ready description served by ``GET /_sim/clock``."""
        return {"kind": type(self).__name__, "now": self.now()}


class ScaledClock(Clock):
    """Simulated time running ``time_scale`` times faster than the monotonic wall clock."""

    def __init__(self, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be positive, got {time_scale!r}")
        self.time_scale = time_scale
        self._started = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._started) * self.time_scale

    def sleep(self, seconds: float) -> Awaitable[None]:
        return asyncio.sleep(max(seconds, 0.0) / self.time_scale)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "timeScale": self.time_scale}


class ManualClock(Clock):
    """A clock that stands still until :meth:`advance` is called (for tests and replayed scenarios).

    ``sleep`` registers a future woken by ``advance`` once its deadline is reached. A cancelled sleeper
    is simply skipped, so controllers may race a sleep against other wake-ups.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        #: Set by whoever runs work on this clock (the control plane): True when nothing is pending, so
        #: :meth:`run_for` can stop yielding early. Without it a fixed number of loop turns is given.
        self.is_settled: Callable[[], bool] | None = None

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> Awaitable[None]:
        if seconds <= 0:
            return asyncio.sleep(0)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), future))
        return future

    def next_deadline(self) -> float | None:
        """The earliest deadline of a live sleeper, or None when nobody sleeps."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` and wake every sleeper whose deadline has passed.

        Returns the new simulated time. Woken sleepers run when the caller next yields to the loop.
        """
        if seconds < 0:
            raise ValueError(f"cannot move time backwards ({seconds!r} s)")
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        return self._now

    def _settled(self) -> bool:
        return self.is_settled is None or self.is_settled()

    async def run_for(self, seconds: float, *, settle: float = 0.0) -> float:
        """Advance ``seconds`` deadline by deadline, letting woken controllers run at each step.

        Unlike one :meth:`advance`, this keeps causality for chains of timers (a node appears after its
        provisioning delay, then a pod binds, then its simulated run time starts). ``settle`` is the
        real time given to the loop after each step (0 yields a few loop iterations).
        """
        target = self._now + seconds
        await _let_loop_run(settle, self._settled)
        while True:
            deadline = self.next_deadline()
            step_to = target if deadline is None or deadline > target else deadline
            self.advance(step_to - self._now)
            await _let_loop_run(settle, self._settled)
            if step_to >= target:
                return self._now


MIN_TURNS, MAX_TURNS = 3, 500


async def _let_loop_run(settle: float, is_settled: Callable[[], bool]) -> None:
    """Give woken tasks the loop: ``settle`` real seconds, else turns until settled (3 to 500 turns)."""
    if settle > 0:
        await asyncio.sleep(settle)
        return
    for turn in range(MAX_TURNS):
        await asyncio.sleep(0)
        if turn >= MIN_TURNS and is_settled():
            return

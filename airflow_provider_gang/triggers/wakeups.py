"""When a waiting trigger wakes up with no change to look at: its deadlines and its tick.

Wake-ups in two times:

- *deadlines* (the policy's reservation or start-up deadline) and a recurring wake-up *every* so
  many seconds (the heartbeat) are in ``reservation.clock``'s time, the time the decisions and the
  log lines are made in; a simulated clock brings them closer in real time, or holds them back
  while it stands still;
- the *tick* is real time (the event loop's ``loop.time()`` by default): the trigger looks again
  every ``tick`` seconds without a change, to check how long the API server has not answered,
  which ``kube.watch`` measures in real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from airflow_provider_gang.reservation.clock import Clock


class WakeSchedule:
    """The wake-ups of one wait: ``deadlines`` (clock moments, ``None`` entries ignored), one
    ``every`` clock seconds and a ``tick`` of real seconds (``None``: none) measured by
    ``real_time`` (default: the running event loop's ``time``, which the timeouts of
    ``kube.watch_registry.Wakeup.wait`` use)."""

    def __init__(
        self,
        clock: Clock,
        deadlines: Iterable[float | None],
        tick: float | None,
        *,
        every: float | None = None,
        real_time: Callable[[], float] | None = None,
    ) -> None:
        self._clock = clock
        self._real_time = real_time or asyncio.get_running_loop().time
        self._pending = sorted(moment for moment in deadlines if moment is not None)
        self._every = every
        self._every_at = None if every is None else clock.now() + every
        self._tick = tick
        self._tick_at = None if tick is None else self._real_time() + tick

    def passed(self) -> int:
        """Drop the deadlines that have passed and restart ``every``; how many wake-ups were due."""
        now, count = self._clock.now(), 0
        while self._pending and self._pending[0] <= now:
            self._pending.pop(0)
            count += 1
        if self._every is not None and self._every_at is not None and self._every_at <= now:
            self._every_at = now + self._every
            count += 1
        return count

    def timeout(self) -> float | None:
        """Real seconds to wait for a change before looking again (``None``: no limit)."""
        upcoming = self._upcoming()
        timeouts = [] if upcoming is None else [self._clock.real_seconds(upcoming - self._clock.now())]
        if self._tick_at is not None:
            timeouts.append(max(0.0, self._tick_at - self._real_time()))
        return min(timeouts, default=None)

    def waited(self, *, changed: bool) -> bool:
        """After a wait: whether it ended with a tick owed (the tick passed, no change came and no
        deadline is due, which :meth:`passed` reports). A change or a tick starts the next tick."""
        ticked = self._tick_at is not None and self._real_time() >= self._tick_at
        if self._tick is not None and (changed or ticked):
            self._tick_at = self._real_time() + self._tick
        upcoming = self._upcoming()
        due = upcoming is not None and upcoming <= self._clock.now()
        return ticked and not changed and not due

    def _upcoming(self) -> float | None:
        """The earliest clock wake-up still to come (or due and not yet reported by :meth:`passed`)."""
        return min(self._pending[:1] + ([] if self._every_at is None else [self._every_at]), default=None)

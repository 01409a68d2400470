"""How fast a client may send: a token bucket, as client-go's ``flowcontrol.NewTokenBucketRateLimiter``.

client-go throttles every request of a ``rest.Config`` (each retry and each watch included) with a
bucket of ``Burst`` tokens refilled at ``QPS`` per second (``k8s.io/client-go/rest/config.go``,
``rest/request.go`` ``tryThrottle``; ``util/flowcontrol/throttle.go``). This bucket does the same:
:meth:`TokenBucket.acquire` takes a token, waiting until one has been refilled if the bucket is
empty. Waiters are served in arrival order: each reserves the next token to come (the bucket may go
negative), as ``golang.org/x/time/rate``'s ``Reservation``, which client-go's limiter wraps. A
waiter cancelled before its turn gives its token back.

The clock and the sleep are parameters, so tests run on fake time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class TokenBucket:
    """At most ``burst`` requests at once, then ``qps`` per second on average.

    Args:
        qps: tokens added per second (> 0).
        burst: capacity of the bucket, and its content at the start (>= 1).
        clock: monotonic seconds (``time.monotonic``).
        sleep: awaited to wait for a token (``asyncio.sleep``).
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be > 0, not {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, not {burst!r}")
        self.qps, self.burst = float(qps), int(burst)
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._updated = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now

    def available(self) -> float:
        """Tokens in the bucket now (negative: that many are already promised to waiters)."""
        self._refill()
        return self._tokens

    async def acquire(self) -> float:
        """Take one token, waiting for it if the bucket is empty; returns the seconds waited."""
        self._refill()
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        wait = -self._tokens / self.qps
        try:
            await self._sleep(wait)
        except BaseException:
            self._refill()
            self._tokens = min(float(self.burst), self._tokens + 1.0)
            raise
        return wait

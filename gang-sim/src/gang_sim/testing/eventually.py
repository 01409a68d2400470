"""Wait for a condition by polling it with a deadline, instead of sleeping a fixed time.

:func:`eventually` (synchronous code) and :func:`eventually_async` (on an event loop) share one
contract, that of Gomega's ``Eventually`` (https://onsi.github.io/gomega/#eventually), the wait of
Kubernetes' own e2e tests:

- ``condition`` is called at once, then every ``interval`` seconds, until it returns a truthy value,
  which is returned (so a test can wait for an object and use it).
- A falsy value, or an exception of ``condition`` (an object not created yet, an ``assert`` inside it
  saying what is still missing), means "not yet": polling goes on.
- Once ``timeout`` seconds have passed (``time.monotonic``, or the running loop's clock) and the last
  call was not truthy, :class:`AssertionError` is raised naming ``what`` and the last value seen, or
  the last exception (also chained as ``__cause__``). A wait never sleeps past the deadline: the
  last call is made when it is reached.

``eventually_async`` also takes a condition returning an awaitable (an ``async def``), awaits it, and
sleeps with ``asyncio.sleep`` so the loop keeps running what the condition waits for.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

DEFAULT_INTERVAL = 0.05
"""Seconds between two calls of the condition unless told otherwise."""


class _LastSeen:
    """What the condition last gave: a value, or the exception it raised."""

    def __init__(self) -> None:
        self.value: object = None
        self.error: Exception | None = None

    def timed_out(self, what: str, timeout: float) -> AssertionError:
        if self.error is not None:
            last = f"last exception: {type(self.error).__name__}: {self.error}"
        else:
            last = f"last value: {self.value!r}"
        failure = AssertionError(f"timed out after {timeout:g} s waiting for {what}; {last}")
        failure.__cause__ = self.error
        return failure


def eventually(
    condition: Callable[[], T | None], *, timeout: float, what: str, interval: float = DEFAULT_INTERVAL
) -> T:
    """The first truthy value of ``condition()``, polled every ``interval`` seconds for up to
    ``timeout`` seconds; ``AssertionError`` naming ``what`` and the last value or exception after."""
    deadline = time.monotonic() + timeout
    seen = _LastSeen()
    while True:
        try:
            value = condition()
        except Exception as error:
            seen.error = error
        else:
            if value:
                return value
            seen.value, seen.error = value, None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise seen.timed_out(what, timeout)
        time.sleep(min(interval, remaining))


@overload
async def eventually_async(
    condition: Callable[[], Awaitable[T | None]], *, timeout: float, what: str, interval: float = DEFAULT_INTERVAL
) -> T: ...


@overload
async def eventually_async(
    condition: Callable[[], T | None], *, timeout: float, what: str, interval: float = DEFAULT_INTERVAL
) -> T: ...


async def eventually_async(
    condition: Callable[[], Any], *, timeout: float, what: str, interval: float = DEFAULT_INTERVAL
) -> Any:
    """:func:`eventually` on the running event loop: ``condition`` may return an awaitable, which is
    awaited; between calls the loop runs other tasks (``asyncio.sleep``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen = _LastSeen()
    while True:
        try:
            value: Any = condition()
            if inspect.isawaitable(value):
                value = await value
        except Exception as error:
            seen.error = error
        else:
            if value:
                return value
            seen.value, seen.error = value, None
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise seen.timed_out(what, timeout)
        await asyncio.sleep(min(interval, remaining))

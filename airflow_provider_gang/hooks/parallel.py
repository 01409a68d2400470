"""Many API calls at once, a bounded number at a time, stopping at the first failure.

A gang's members are created (or their gates released) by a few workers pulling from one queue
rather than by one coroutine per member: the first call that fails past the client's retries stops
the workers from starting more, the calls already sent finish (their outcome is on the server
either way; a retry adopts what they created), and that first error is raised. This is the
"stop at the first error" half of the Job and ReplicaSet controllers' ``slowStartBatch``
(``kubernetes/pkg/controller/job/job_controller.go``), without its slow start: a gang is created
all at once because its reservation's booking lasts 10 minutes (``BookingExpired``,
cluster-autoscaler ``proposals/provisioning-request.md``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


async def bounded_gather(calls: Sequence[Callable[[], Awaitable[T]]], *, limit: int | None) -> list[T]:
    """The results of every call of ``calls``, in order, with at most ``limit`` running at once
    (``None``: all at once), started in the order given; after a call raises, none is started
    any more, those running are awaited and the first exception is raised."""
    results: dict[int, T] = {}
    failures: list[Exception] = []
    queue = iter(enumerate(calls))

    async def worker() -> None:
        for index, call in queue:
            if failures:
                return
            try:
                results[index] = await call()
            except Exception as error:  # raised below, once every worker has stopped
                failures.append(error)
                return

    workers = min(limit or len(calls), len(calls))
    await asyncio.gather(*(worker() for _ in range(workers)))
    if failures:
        raise failures[0]
    return [results[index] for index in range(len(calls))]

"""How a try waits for a trigger's event: deferred to the triggerer, or inline in the worker.

Both run the same trigger code (STYLE point 5). :class:`DeferringWaiter` hands the trigger to
Airflow (``BaseOperator.defer`` raises ``TaskDeferred``; Airflow resumes the task at
``resume_method`` with the event). :class:`InlineWaiter` runs the trigger on a private event loop
in the worker until its first event and returns it; it also holds what a blocking ``on_kill`` needs,
and remembers that the try was killed so the try ends as ``killed``, not with whatever the trigger
saw of the deletion.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.operators import gang_objects
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.triggers.base import GangTrigger

DEFER_SLACK = timedelta(minutes=2)
"""Added to a trigger's own deadline for Airflow's ``defer(timeout=)``: the trigger reports first."""
KILL_DELETE_TIMEOUT = 60.0
"""How long a blocking ``on_kill`` waits for the gang's deletion."""


class Waiter(Protocol):
    """What ``operators.execution`` needs of a way to wait."""

    @property
    def killed(self) -> bool:
        """Whether the try was killed while it waited (its gang deleted by ``on_kill``)."""

    def wait(self, trigger: GangTrigger, *, resume_method: str, deadline: float, spec: GangSpec) -> dict[str, Any]:
        """The payload of ``trigger``'s first event; a deferring waiter raises ``TaskDeferred`` instead."""


class DeferringWaiter:
    """Defer with ``defer`` (the operator's ``BaseOperator.defer``)."""

    killed = False  # a deferred task has no worker to kill; its trigger's on_kill cleans up

    def __init__(self, defer: Callable[..., Any]) -> None:
        self._defer = defer

    def wait(self, trigger: GangTrigger, *, resume_method: str, deadline: float, spec: GangSpec) -> dict[str, Any]:
        timeout = timedelta(seconds=max(1.0, deadline - time.time())) + DEFER_SLACK
        self._defer(trigger=trigger, method_name=resume_method, timeout=timeout)
        raise RuntimeError("BaseOperator.defer returned instead of raising TaskDeferred")


class InlineWaiter:
    """Run the trigger in the worker; :meth:`kill` is the blocking operator's ``on_kill``."""

    def __init__(self, log: Any, client_options: ClientOptions) -> None:
        self._log = log
        self._client_options = client_options
        self._active: tuple[ConnectionSettings, GangSpec] | None = None
        self._killed = threading.Event()

    @property
    def killed(self) -> bool:
        return self._killed.is_set()

    def wait(self, trigger: GangTrigger, *, resume_method: str, deadline: float, spec: GangSpec) -> dict[str, Any]:
        self._active = (ConnectionSettings.from_dict(trigger.connection), spec)
        try:
            return asyncio.run(_first_event(trigger))
        finally:
            self._active = None

    def kill(self) -> None:
        """Mark the try killed, then delete every object of the gang being waited for.

        Airflow calls ``on_kill`` from its SIGTERM handler, on the main thread, while that thread's
        event loop runs the trigger; so the deletion uses a thread, loop and client of its own.
        """
        self._killed.set()
        active = self._active
        if active is None:
            return
        settings, spec = active

        async def delete() -> int:
            async with await self._client_options.connect(settings) as client:
                return await gang_objects.teardown(client, spec)

        def run() -> None:
            deleted = asyncio.run(delete())
            self._log.info("on_kill: deleted %d objects of gang %s", deleted, spec.name)

        worker = threading.Thread(target=run, name="gang-on-kill", daemon=True)
        worker.start()
        worker.join(timeout=KILL_DELETE_TIMEOUT)


async def _first_event(trigger: GangTrigger) -> dict[str, Any]:
    """The payload of the trigger's first event; the trigger's own deadline bounds the wait."""
    async with contextlib.aclosing(trigger.run()) as events:  # type: ignore[type-var]  # run() is a generator
        try:
            event = await anext(events)
        finally:
            await trigger.cleanup()
    return dict(event.payload)

"""How a try waits for a trigger's event: deferred to the triggerer, or inline in the worker.

Both run the same trigger code (STYLE point 5). :class:`DeferringWaiter` hands the trigger to
Airflow (``BaseOperator.defer`` raises ``TaskDeferred``; Airflow resumes the task with the event in
the operator method it was given for the trigger's stage). :class:`InlineWaiter` runs the trigger on
a private event loop in the worker until its first event and returns it. Both hold what ``on_kill`` needs while the
worker runs a stage, and remember that the try was killed, so it ends as ``killed``, not with
whatever the trigger saw of the deletion.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

from airflow_provider_gang.airflow_compat import AirflowTaskTerminated
from airflow_provider_gang.hooks import deletion
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import clock
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.records.events import GangEvent
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
        """Whether ``on_kill`` ran during this entry point of the try."""

    def track(
        self, connection: ConnectionSettings, spec: GangSpec, *, elsewhere: Sequence[ConnectionSettings] = ()
    ) -> None:
        """The gang the worker works on from now on: what ``on_kill`` deletes, on ``connection``'s
        cluster and then on each of ``elsewhere`` (a MultiKueue worker the gang runs on)."""

    def wait(self, trigger: GangTrigger, *, deadline: float, spec: GangSpec) -> GangEvent:
        """``trigger``'s first event; a deferring waiter raises ``TaskDeferred`` instead."""


class _KillSwitch:
    """``on_kill`` while a worker runs a stage of a try, in either mode: mark the try killed, then
    delete every object of the gang it works on.

    Airflow calls ``on_kill`` from its SIGTERM handler (``task_runner._on_term``), on the main thread,
    while that thread may be inside a request or an event loop; so the deletion uses a thread, loop
    and client of its own. A deferred task has no worker: its trigger's ``on_kill`` cleans up.
    """

    def __init__(self, log: Any, client_options: ClientOptions) -> None:
        self._log = log
        self._client_options = client_options
        self._active: tuple[tuple[ConnectionSettings, ...], GangSpec] | None = None
        self._killed = threading.Event()

    @property
    def killed(self) -> bool:
        return self._killed.is_set()

    def track(
        self, connection: ConnectionSettings, spec: GangSpec, *, elsewhere: Sequence[ConnectionSettings] = ()
    ) -> None:
        self._active = ((connection, *elsewhere), spec)

    def refuse_if_killed(self) -> None:
        """Raise ``AirflowTaskTerminated`` if ``on_kill`` already ran: a killed try must not start a
        wait (objects created after the kill's deletion would outlive the task)."""
        if self.killed:
            raise AirflowTaskTerminated("on_kill ran while the try was being prepared")

    def kill(self) -> None:
        self._killed.set()
        active = self._active
        if active is None:
            return
        places, spec = active

        async def delete(settings: ConnectionSettings) -> int:
            async with await self._client_options.connect(settings) as client:
                return await deletion.teardown(client, spec)

        def run() -> None:
            for settings in places:  # the gang's own cluster first (a MultiKueue manager), then its worker
                try:
                    deleted = asyncio.run(delete(settings))
                except Exception as error:  # the other cluster's deletion is still worth doing
                    self._log.warning("on_kill: gang %s not deleted on one cluster (%s)", spec.name, error)
                    continue
                self._log.info("on_kill: deleted %d objects of gang %s", deleted, spec.name)

        worker = threading.Thread(target=run, name="gang-on-kill", daemon=True)
        worker.start()
        worker.join(timeout=KILL_DELETE_TIMEOUT)


class DeferringWaiter(_KillSwitch):
    """Defer with ``defer`` (the operator's ``BaseOperator.defer``); Airflow resumes the task in
    ``resume_methods[trigger.stage]``, the name of an operator method taking ``(context, event)``."""

    def __init__(
        self,
        defer: Callable[..., Any],
        resume_methods: Mapping[Stage, Callable[..., Any]],
        log: Any,
        client_options: ClientOptions,
    ) -> None:
        super().__init__(log, client_options)
        self._defer = defer
        self._resume_methods = dict(resume_methods)

    def wait(self, trigger: GangTrigger, *, deadline: float, spec: GangSpec) -> GangEvent:
        self.refuse_if_killed()
        timeout = timedelta(seconds=max(1.0, deadline - clock.current().now())) + DEFER_SLACK
        self._active = None  # the worker leaves the gang to the trigger
        method = self._resume_methods[trigger.stage]
        self._defer(trigger=trigger, method_name=method.__name__, timeout=timeout)
        raise RuntimeError("BaseOperator.defer returned instead of raising TaskDeferred")


class InlineWaiter(_KillSwitch):
    """Run the trigger in the worker until its first event."""

    def wait(self, trigger: GangTrigger, *, deadline: float, spec: GangSpec) -> GangEvent:
        self.refuse_if_killed()
        return GangEvent.from_dict(asyncio.run(_first_payload(trigger)))


async def _first_payload(trigger: GangTrigger) -> dict[str, Any]:
    """The payload of the trigger's first event; the trigger's own deadline bounds the wait."""
    async with contextlib.aclosing(trigger.run()) as events:  # type: ignore[type-var]  # run() is a generator
        try:
            event = await anext(events)
        finally:
            await trigger.cleanup()
    return dict(event.payload)

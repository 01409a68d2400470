"""What both gang triggers share: watches shared in the process, raced against a deadline, a guarded ``on_kill``.

Arguments common to every gang trigger (all plain values, part of the stored format):

- ``kubernetes_conn_id``: the Airflow ``kubernetes`` connection, resolved by ``GangHook`` in the
  triggerer (credentials never travel in the kwargs: Airflow 3.3 stores a deferred task's trigger
  kwargs in clear text in the ``trigger`` table). ``connection``: :meth:`ConnectionSettings.to_dict`
  output instead, for triggers serialized before ``kubernetes_conn_id`` existed and for tests; give
  exactly one of the two.
- ``gang_name``, ``namespace``: identity of the gang (the names of its objects derive from it).
- ``mode``: ``ReservationMode`` value the gang is reserved with; ``size``: members (requested, or
  launched after partial admission); ``started_at``: UNIX time the wait started (timings, messages).
- ``provisioning_request`` / ``workload_selector`` / ``pod_selector``: the gang's ProvisioningRequest
  name, Kueue Workload label selector, member pods label selector - whichever the wait watches.
- ``deadline``: absolute UNIX time at which the trigger gives up with reason ``deadline``. It is absolute
  so a trigger rebuilt on another triggerer keeps the original budget (as cncf-kubernetes'
  ``KubernetesPodTrigger`` keeps ``_execution_deadline``, ``triggers/pod.py``; apache/airflow#67227).
- ``delete_on_kill``: the gang's objects, ``{"resource": <key>, "name": str|None, "label_selector": str}``,
  deleted by :meth:`on_kill` only.
- ``client_options``: :class:`kube.options.ClientOptions` as a dict.
- ``watch_timeout_seconds``: length of each WATCH request.
- ``unreachable_seconds``: how long the API server may fail to answer (transport errors, 429/5xx past
  every retry, consecutively) before the wait ends with reason ``cluster_unreachable``; each retry
  is logged with its backoff. Before its first successful LIST a trigger decides nothing else: a
  deadline that passes meanwhile waits for that LIST. A deadline is decided on a fresh LIST of every
  watched kind (:meth:`GangTrigger.read_now`), never on the watch caches alone.
- ``try_number``: the Airflow try that deferred to this trigger; :mod:`.kill` compares it with the try
  that owns the gang now. ``None`` (the default, for triggers serialized before it existed) falls
  back to the trigger's task instance's try number in a triggerer.
- ``heartbeat_seconds``, ``tries_allowed``, ``step_description``: what the wait logs (:mod:`.progress`).

Every gang trigger waiting in one process follows one watch per (connection, namespace, kind) over one
client (:mod:`kube.shared_watches`; a trigger rebuilt in another process joins that one's); a spot
gang's member failure is decided after reading its spot nodes (:mod:`.spot_nodes`). Two copies at once
(HA triggerers, apache/airflow#37180) only read, so they cost requests but change nothing; ``cleanup()``
leaves the watches; ``on_kill()`` deletes, guarded so that a gang live elsewhere survives (:mod:`.kill`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.kube import errors, shared_watches
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import by_key
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.shared_watches import Subscription
from airflow_provider_gang.kube.watch import Objects, Reflector
from airflow_provider_gang.reservation import clock as reservation_clock
from airflow_provider_gang.reservation import member_history
from airflow_provider_gang.reservation.decision import Decision, Policy, decide
from airflow_provider_gang.reservation.observed import Observed, Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers import kill, spot_nodes
from airflow_provider_gang.triggers.events import PhaseClock, build_payload
from airflow_provider_gang.triggers.observation import GangObjects, trimmer
from airflow_provider_gang.triggers.progress import DEFAULT_HEARTBEAT_SECONDS, WaitReporter
from airflow_provider_gang.triggers.wakeups import WakeSchedule

FRESH_READ_TIMEOUT_SECONDS = 30.0
"""Longest wait for the fresh LIST a deadline is decided on (capped by ``unreachable_seconds``)."""


class GangTrigger(BaseTrigger):
    """Base of the gang triggers: ``run`` is shared; subclasses set ``stage`` and implement ``policy``,
    ``describe_wait`` and ``serialize`` (through :meth:`serialize_with`)."""

    stage: Stage
    """What the trigger waits for: set by each subclass."""
    scheduling_gate: str | None = None
    pods_from_job: bool = False
    read_checkpoints: bool = False

    def __init__(
        self,
        *,
        gang_name: str,
        namespace: str,
        deadline: float,
        mode: str,
        size: int,
        started_at: float,
        provisioning_request: str | None = None,
        workload_selector: str | None = None,
        pod_selector: str | None = None,
        delete_on_kill: Sequence[Mapping[str, Any]] = (),
        client_options: Mapping[str, Any] | None = None,
        watch_timeout_seconds: int = 300,
        try_number: int | None = None,
        unreachable_seconds: float = 600.0,
        kubernetes_conn_id: str | None = None,
        connection: Mapping[str, Any] | None = None,
        heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS,
        tries_allowed: int | None = None,
        step_description: str | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        if (kubernetes_conn_id is None) == (connection is None):
            raise ValueError("give a gang trigger exactly one of kubernetes_conn_id and connection")
        self.kubernetes_conn_id = kubernetes_conn_id
        self.connection = None if connection is None else dict(connection)
        self.gang_name = gang_name
        self.namespace = namespace
        self.deadline = float(deadline)
        self.mode = ReservationMode(mode)
        self.size = int(size)
        self.started_at = float(started_at)
        self.objects = GangObjects(
            provisioning_request=provisioning_request, workload_selector=workload_selector, pod_selector=pod_selector
        )
        self.delete_on_kill = [dict(target) for target in delete_on_kill]
        self.client_options = dict(client_options or {})
        self.watch_timeout_seconds = int(watch_timeout_seconds)
        self.try_number = None if try_number is None else int(try_number)
        self.unreachable_seconds = float(unreachable_seconds)
        self.heartbeat_seconds = float(heartbeat_seconds)
        self.tries_allowed = None if tries_allowed is None else int(tries_allowed)
        self.step_description = step_description
        self.fired = False
        self.subscriptions: list[Subscription] = []
        """What the trigger follows of the watches shared in its process (:meth:`views`), until cleanup."""
        self.reflectors: list[Reflector] = []
        """The reflectors of the shared watches it followed (their counters are the watch's), kept after."""

    def policy(self) -> Policy:
        """The deadlines ``decide`` applies; each subclass sets its own."""
        raise NotImplementedError

    def describe_wait(self) -> str:
        """What the trigger waits for, for the log line when it starts."""
        raise NotImplementedError

    def serialize_with(self, **own: Any) -> tuple[str, dict[str, Any]]:
        """``serialize()`` of a subclass: its class path, the common arguments and its ``own``."""
        return f"{type(self).__module__}.{type(self).__qualname__}", {**self.common_kwargs(), **own}

    def common_kwargs(self) -> dict[str, Any]:
        """The base arguments as plain values (part of the stored format)."""
        return {
            "kubernetes_conn_id": self.kubernetes_conn_id,
            "connection": None if self.connection is None else dict(self.connection),
            "gang_name": self.gang_name,
            "namespace": self.namespace,
            "deadline": self.deadline,
            "mode": self.mode.value,
            "size": self.size,
            "started_at": self.started_at,
            "provisioning_request": self.objects.provisioning_request,
            "workload_selector": self.objects.workload_selector,
            "pod_selector": self.objects.pod_selector,
            "delete_on_kill": [dict(target) for target in self.delete_on_kill],
            "client_options": dict(self.client_options),
            "watch_timeout_seconds": self.watch_timeout_seconds,
            "try_number": self.try_number,
            "unreachable_seconds": self.unreachable_seconds,
            "heartbeat_seconds": self.heartbeat_seconds,
            "tries_allowed": self.tries_allowed,
            "step_description": self.step_description,
        }

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Yield the one event: the payload of the first terminal decision (see :mod:`.events`).

        The trigger leaves its shared watches before the event is yielded: ``dag.test()`` takes only
        the first event and never calls ``cleanup()`` (``InProcessTestSupervisor.run_trigger_in_process``,
        Airflow 3.3.2), which would leave the watch and its HTTP session to the garbage collector.
        ``cleanup()`` stays idempotent for the triggerer, which always calls it.
        """
        self.log.info("Gang %s: %s", self.gang_name, self.describe_wait())
        try:
            payload = await self.decide_until_terminal()
        finally:
            await self.cleanup()
        self.fired = True
        self.log.info("Gang %s: %s (%s) %s", self.gang_name, payload["phase"], payload["reason"], payload["message"])
        yield TriggerEvent(payload)  # type: ignore[no-untyped-call]

    async def connect(self) -> KubeClient:
        """A new client with the trigger's connection and ``client_options``; the caller closes it."""
        return await ClientOptions.from_dict(self.client_options).connect(await self.connection_settings())

    async def connection_settings(self) -> ConnectionSettings:
        """The cluster to talk to: ``kubernetes_conn_id`` resolved here, in the triggerer, by
        ``GangHook`` - run in a thread (``sync_to_async``), as the hook reads the connection
        synchronously (``BaseHook.aget_hook``'s docstring: a sync read on the loop can deadlock)."""
        if self.connection is not None:
            return ConnectionSettings.from_dict(self.connection)
        hook = GangHook(conn_id=self.kubernetes_conn_id)
        settings: ConnectionSettings = await sync_to_async(hook.connection_settings)()
        return settings

    def __repr__(self) -> str:
        """Without the ``connection`` kwarg (``BaseTrigger.__repr__`` prints every kwarg)."""
        return f"<{type(self).__qualname__} gang={self.gang_name} namespace={self.namespace} try={self.try_number}>"

    async def views(
        self, watches: Sequence[Mapping[str, str]], wake_times: Sequence[float | None] = (), tick: float | None = None,
        every: float | None = None,
    ) -> AsyncGenerator[dict[str, Objects] | None, None]:
        """List then watch every ``{"resource", "label_selector", "field_selector"}`` of ``watches``.

        Yields ``{resource key: {name: object}}`` after every change, and ``None`` when one of
        ``wake_times`` (moments of ``reservation.clock``, e.g. the policy's deadlines) passes with no
        change, ``every`` clock seconds, and every ``tick`` real seconds without a change
        (:mod:`.wakeups`), so the caller decides again on the last view. It stops once decided.
        """
        settings = await self.connection_settings()
        options = ClientOptions.from_dict(self.client_options)
        connection = shared_watches.connection_key(settings.to_dict(), options.to_dict())
        registry = shared_watches.for_running_loop()
        wakeup = asyncio.Event()
        for watch in watches:
            self.subscriptions.append(await registry.subscribe(
                connection=connection, connect=functools.partial(options.connect, settings),
                resource=by_key(watch["resource"]), namespace=self.namespace,
                label_selector=watch.get("label_selector", ""), field_selector=watch.get("field_selector", ""),
                watch_timeout_seconds=self.watch_timeout_seconds, on_retry=self._log_retry, notify=wakeup.set,
                transform=trimmer(watch["resource"]),
            ))
        self.reflectors = [subscription.reflector for subscription in self.subscriptions]
        stream = shared_watches.together(self.subscriptions, wakeup)
        # One pending ``anext`` survives wake-ups: cancelling it would close the stream.
        next_view: asyncio.Future[dict[str, Objects]] | None = None
        schedule = WakeSchedule(reservation_clock.current(), wake_times, tick, every=every)
        try:
            while True:
                for _ in range(schedule.passed()):
                    yield None
                if next_view is None:
                    next_view = asyncio.ensure_future(anext(stream))
                done, _ = await asyncio.wait({next_view}, timeout=schedule.timeout())
                if schedule.waited(changed=bool(done)):
                    yield None
                elif done:
                    view, next_view = next_view.result(), None
                    yield view
        finally:
            if next_view is not None:
                next_view.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await next_view
            await stream.aclose()

    async def decide_until_terminal(self) -> dict[str, Any]:
        """Watch the gang's objects, feed every change to ``decide`` and return the event payload of the
        first terminal decision. The policy's deadlines wake the loop even when nothing changes.

        A non-retryable API error (Forbidden, Unauthorized, a kind that is not served) ends the wait
        with reason ``invalid``: the same spec on the same cluster cannot do better on a new try.
        """
        objects, policy = self.objects, self.policy()
        observe = functools.partial(
            objects.observe,
            mode=self.mode,
            stage=self.stage,
            size=self.size,
            started_at=self.started_at,
            scheduling_gate=self.scheduling_gate,
            pods_from_job=self.pods_from_job,
        )
        observed = observe({})
        clock = PhaseClock(self.started_at)
        seen_any = False
        memory = member_history.RunMemory(self.read_checkpoints)  # what pods deleted later take with them
        reporter = WaitReporter(self.log, self.gang_name, started_at=self.started_at,
                                heartbeat_seconds=self.heartbeat_seconds, try_number=self.own_try,
                                tries_allowed=self.tries_allowed, step_description=self.step_description)
        tick = min(5.0, max(0.05, self.unreachable_seconds / 10))  # real seconds; the heartbeat's are the clock's
        try:
            async with contextlib.aclosing(
                self.views(objects.watches(), wake_times=(policy.deadline, policy.startup_deadline), tick=tick,
                           every=reporter.tick_seconds())
            ) as views:
                async for view in views:
                    now = reservation_clock.current().now()
                    unreachable = self.unreachable()
                    if unreachable is not None:
                        return build_payload(
                            observed, unreachable, gang_name=self.gang_name, namespace=self.namespace, clock=clock
                        )
                    if view is not None:
                        seen_any = True
                        problem = objects.malformed(view)
                        if problem is not None:
                            unreadable = Decision(
                                phase=Phase.FAILED, terminal=True, reason=Reason.MALFORMED_ANSWER,
                                message=f"the API server sent an object this provider cannot read: {problem}",
                            )
                            return build_payload(observed, unreadable, gang_name=self.gang_name,
                                                 namespace=self.namespace, clock=clock)
                        observed = self.remembered(memory, observe(view))
                    elif not seen_any:
                        continue  # nothing listed yet: an empty view would read as "the reservation is gone"
                    decision = decide(observed, now=now, policy=policy)
                    if decision.terminal and decision.reason == Reason.DEADLINE:
                        fresh = await self.read_now()
                        if fresh is not None and objects.malformed(fresh) is None:
                            observed = self.remembered(memory, observe(fresh))
                            decision = decide(observed, now=now, policy=policy)
                    client = self.subscriptions[0].reflector.client  # the process's shared client of this connection
                    if await spot_nodes.found_shutting_down(decision, memory, client, self.log, self.gang_name):
                        observed = self.remembered(memory, observed)
                        decision = decide(observed, now=now, policy=policy)
                    clock.saw(decision.phase, now)
                    reporter.saw(observed, decision, now)
                    memory.remember(decision.members)
                    if decision.terminal:
                        decision = replace(decision, members=memory.ended(decision.members, now=now))
                        return build_payload(observed, decision, gang_name=self.gang_name, namespace=self.namespace,
                                             clock=clock, checkpoint=memory.checkpoint)
        except errors.KubeError as error:
            if error.retryable:
                raise
            refused = Decision(
                phase=Phase.FAILED, terminal=True, reason=Reason.INVALID, message=f"the API server refused: {error}"
            )
            return build_payload(
                observed, refused, gang_name=self.gang_name, namespace=self.namespace, clock=clock, api_error=error
            )
        raise RuntimeError("the watch ended without a terminal decision")  # views() never ends on its own

    def remembered(self, memory: member_history.RunMemory, observed: Observed) -> Observed:
        """``observed`` with what ``memory`` keeps; a malformed termination message is logged, once."""
        observed, warnings = memory.see(observed)
        for warning in warnings:
            self.log.warning("Gang %s: %s", self.gang_name, warning)
        return observed

    async def read_now(self) -> dict[str, Objects] | None:
        """A fresh LIST of every watched kind, or ``None`` if the server does not answer in time.

        A deadline is decided on this, not on the shared watches' caches: after 410s with no event a
        reflector relists only after its backoff (up to the client's ``max_delay``), so its view can
        say "not started" about members that started since.
        """
        try:
            views = await asyncio.wait_for(
                asyncio.gather(*(subscription.read_now() for subscription in self.subscriptions)),
                timeout=min(FRESH_READ_TIMEOUT_SECONDS, self.unreachable_seconds),
            )
        except (errors.KubeError, asyncio.TimeoutError) as error:
            self.log.warning("Gang %s: could not read the gang afresh before deciding its deadline (%s); "
                             "deciding on the last view", self.gang_name, error)
            return None
        return {subscription.resource.key: view for subscription, view in zip(self.subscriptions, views, strict=True)}

    def unreachable(self) -> Decision | None:
        """The ``cluster_unreachable`` decision once a watch has had no answer for this trigger for
        ``unreachable_seconds`` in a row (:meth:`Subscription.failing_for`), else ``None``."""
        failing = max(self.subscriptions, key=lambda subscription: subscription.failing_for(), default=None)
        if failing is None or failing.failing_for() < self.unreachable_seconds:
            return None
        return Decision(phase=Phase.FAILED, terminal=True, reason=Reason.CLUSTER_UNREACHABLE,
                        message=f"no answer from the API server for {failing.failing_for():.0f} s "
                                f"(last: {failing.resource.plural}: {failing.reflector.last_error})")

    def _log_retry(self, subscription: Subscription, error: errors.KubeError, delay: float) -> None:
        self.log.warning("Gang %s: API server did not answer (%s: %s); retrying in %.1f s, no answer for %.0f s "
                         "of the %.0f s allowed", self.gang_name, subscription.resource.plural, error, delay,
                         subscription.failing_for(), self.unreachable_seconds)

    async def cleanup(self) -> None:
        """Leave the shared watches (the last subscriber of a watch stops it, the last watch of a
        connection closes its client). Deletes nothing: cleanup runs on every exit, triggerer restarts
        included. Idempotent."""
        await shared_watches.for_running_loop().unsubscribe_all(self.subscriptions)

    async def on_kill(self) -> None:
        """Delete the gang's objects after a user action, unless it may still be live (:mod:`.kill`)."""
        await kill.on_kill(self)

    async def delete_gang_objects(self) -> int:
        """Delete every ``delete_on_kill`` target with a client of its own (:func:`.kill.delete_gang_objects`)."""
        return await kill.delete_gang_objects(self)

    async def task_state(self) -> str:
        """State of this trigger's task instance (:func:`.kill.task_state`)."""
        return await kill.task_state(self.task_instance, self.log, self.gang_name)

    @property
    def own_try(self) -> int | None:
        """The try this trigger waits for: ``try_number``, else its task instance's (``None``: unknown)."""
        if self.try_number is not None:
            return self.try_number
        recorded = getattr(self.task_instance, "try_number", None)
        return recorded if isinstance(recorded, int) else None

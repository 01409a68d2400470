"""What both gang triggers share: their arguments, watches shared in the process raced against the
policy's deadlines, and a guarded ``on_kill``.

Both take one ``reservation.records.triggers.TriggerArguments`` (the stored format of their kwargs,
documented field by field there): ``serialize()`` returns its ``to_dict()``, the constructor reads
the kwargs with its tolerant ``from_dict``.

Every gang trigger waiting in one process follows one watch per (connection, namespace, kind) over one
client (:mod:`.following`, :mod:`kube.shared_watches`; a trigger rebuilt in another process joins that
one's); a spot gang's member failure is decided after reading its spot nodes (:mod:`.spot_nodes`);
a gang with a checkpoint has its running members stopped and their reports read before the event
(:mod:`.survivors`).
Two copies at once (HA triggerers, apache/airflow#37180) only read, so they cost requests but change
nothing; ``cleanup()`` leaves the watches; ``on_kill()`` deletes, guarded so that a gang live
elsewhere survives (:mod:`.kill`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.shared_watch import Subscription
from airflow_provider_gang.kube.watch import Objects, Reflector
from airflow_provider_gang.reservation import clock as reservation_clock
from airflow_provider_gang.reservation import member_history, naming
from airflow_provider_gang.reservation.decision import Decision, Policy, decide
from airflow_provider_gang.reservation.observed import Observed, Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.records.events import ApiRefusal, GangEvent
from airflow_provider_gang.reservation.records.triggers import DeleteTarget, TriggerArguments
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers import kill, spot_nodes, survivors
from airflow_provider_gang.triggers.events import PhaseClock
from airflow_provider_gang.triggers.following import FollowedWatches
from airflow_provider_gang.triggers.observation import MEMBERS, GangObjects
from airflow_provider_gang.triggers.progress import WaitReporter


class GangTrigger(BaseTrigger):
    """Base of the gang triggers: ``run`` is shared; subclasses set ``stage`` and implement ``policy``
    and ``describe_wait``."""

    stage: Stage
    """What the trigger waits for: set by each subclass."""

    def __init__(self, **kwargs: Any) -> None:
        """Read ``kwargs`` as ``TriggerArguments`` (what ``serialize()`` wrote, or ``to_dict()``)."""
        super().__init__()  # type: ignore[no-untyped-call]
        self.arguments = arguments = TriggerArguments.from_dict(kwargs)
        self.gang_name = arguments.gang_name
        self.namespace = arguments.namespace
        self.mode = arguments.mode
        self.size = arguments.size
        self.started_at = arguments.started_at
        self.deadline = arguments.deadline
        self.try_number = arguments.try_number
        self.objects = GangObjects(
            provisioning_request=arguments.provisioning_request,
            workload_selector=arguments.workload_selector,
            pod_selector=arguments.pod_selector,
            pod_group=naming.GangNames(self.gang_name).pod_group if self.mode is ReservationMode.WORKLOAD else None,
            job=arguments.job_name,
            members_elsewhere=arguments.members_kubernetes_conn_id is not None,
        )
        self.fired = False
        self.following = FollowedWatches(self.log, self.gang_name, unreachable_seconds=arguments.unreachable_seconds)

    @classmethod
    def of(cls, arguments: TriggerArguments) -> GangTrigger:
        """The trigger of ``arguments``, built as a triggerer rebuilds it from the stored kwargs."""
        return cls(**arguments.to_dict())

    @property
    def delete_on_kill(self) -> tuple[DeleteTarget, ...]:
        return self.arguments.delete_on_kill

    @property
    def subscriptions(self) -> list[Subscription]:
        """What the trigger follows of the watches shared in its process, until cleanup."""
        return self.following.subscriptions

    @property
    def reflectors(self) -> list[Reflector]:
        """The reflectors of the shared watches it followed (their counters are the watch's), kept after."""
        return self.following.reflectors

    def policy(self) -> Policy:
        """The deadlines ``decide`` applies; each subclass sets its own."""
        raise NotImplementedError

    def describe_wait(self) -> str:
        """What the trigger waits for, for the log line when it starts."""
        raise NotImplementedError

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Its class path and :attr:`arguments` as plain values (the stored format)."""
        return f"{type(self).__module__}.{type(self).__qualname__}", self.arguments.to_dict()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Yield the one event: the ``GangEvent`` of the first terminal decision, as plain values.

        The trigger leaves its shared watches before the event is yielded: ``dag.test()`` takes only
        the first event and never calls ``cleanup()`` (``InProcessTestSupervisor.run_trigger_in_process``,
        Airflow 3.3.2), which would leave the watch and its HTTP session to the garbage collector.
        ``cleanup()`` stays idempotent for the triggerer, which always calls it.
        """
        self.log.info("Gang %s: %s", self.gang_name, self.describe_wait())
        try:
            event = await self.decide_until_terminal()
        finally:
            await self.cleanup()
        self.fired = True
        self.log.info("Gang %s: %s (%s) %s", self.gang_name, event.phase.value, event.reason.value, event.message)
        yield TriggerEvent(event.to_dict())  # type: ignore[no-untyped-call]

    async def connect(self, conn_id: str | None = None) -> KubeClient:
        """A new client with the trigger's connection (or ``conn_id``'s) and ``client_options``; the
        caller closes it."""
        options = ClientOptions.from_dict(self.arguments.client_options)
        return await options.connect(await self.connection_settings(conn_id))

    @property
    def members_kubernetes_conn_id(self) -> str | None:
        """The connection of the cluster the members run on when it is not the trigger's own (a
        MultiKueue worker): ``on_kill`` deletes there too."""
        return self.arguments.members_kubernetes_conn_id

    async def connection_settings(self, conn_id: str | None = None) -> ConnectionSettings:
        """The cluster to talk to: ``conn_id`` (default: ``kubernetes_conn_id``, or the explicit
        ``connection``) resolved here, in the triggerer, by ``GangHook`` - run in a thread
        (``sync_to_async``), as the hook reads the connection synchronously (``BaseHook.aget_hook``'s
        docstring: a sync read on the loop can deadlock)."""
        if conn_id is None and self.arguments.connection is not None:
            return ConnectionSettings.from_dict(self.arguments.connection)
        hook = GangHook(conn_id=conn_id or self.arguments.kubernetes_conn_id)
        settings: ConnectionSettings = await sync_to_async(hook.connection_settings)()
        return settings

    def __repr__(self) -> str:
        """Without the ``connection`` kwarg (``BaseTrigger.__repr__`` prints every kwarg)."""
        return f"<{type(self).__qualname__} gang={self.gang_name} namespace={self.namespace} try={self.try_number}>"

    def _event(self, observed: Observed, decision: Decision, clock: PhaseClock, **extra: Any) -> GangEvent:
        """The event that reports ``decision`` now; ``extra``: ``api_error``, ``checkpoint``, ``logs``,
        ``unread_reports``."""
        event_at = reservation_clock.current().now()
        clock.saw(decision.phase, event_at)
        return GangEvent.of_decision(
            decision,
            stage=observed.stage,
            gang_name=self.gang_name,
            namespace=self.namespace,
            mode=observed.mode,
            timings=clock.timings(event_at),
            **extra,
        )

    async def decide_until_terminal(self) -> GangEvent:
        """Watch the gang's objects, feed every change to ``decide`` and return the event of the first
        terminal decision. The policy's deadlines wake the loop even when nothing changes.

        A non-retryable API error (Forbidden, Unauthorized, a kind that is not served) ends the wait
        with reason ``invalid``: the same spec on the same cluster cannot do better on a new try.
        """
        arguments, objects, policy, following = self.arguments, self.objects, self.policy(), self.following
        observe = functools.partial(
            objects.observe,
            mode=self.mode,
            stage=self.stage,
            size=self.size,
            started_at=self.started_at,
            scheduling_gate=arguments.scheduling_gate if self.stage is Stage.RESERVATION else None,
            pods_from_job=arguments.members_from_job if self.stage is Stage.RUN else False,
        )
        observed = observe({})
        clock = PhaseClock(self.started_at)
        seen_any = False
        # What pods deleted later take with them.
        memory = member_history.RunMemory(
            arguments.read_checkpoints and self.stage is Stage.RUN, preemption_taints=arguments.preemption_taints
        )
        reporter = WaitReporter(
            self.log,
            self.gang_name,
            started_at=self.started_at,
            heartbeat_seconds=arguments.heartbeat_seconds,
            try_number=self.own_try,
            tries_allowed=arguments.tries_allowed,
            step_description=arguments.step_description,
        )
        tick = min(5.0, max(0.05, arguments.unreachable_seconds / 10))  # real seconds; the heartbeat's are the clock's
        members = arguments.members_kubernetes_conn_id
        ended_tails = (
            survivors.EndedTails(self.namespace, objects.pod_selector, arguments.log_ranks, self.log, self.gang_name)
            if members and objects.pod_selector and self.stage is Stage.RUN
            else None
        )
        views = following.views(
            await self.connection_settings(),
            ClientOptions.from_dict(arguments.client_options),
            namespace=self.namespace,
            watches=objects.watches(),
            watch_timeout_seconds=arguments.watch_timeout_seconds,
            wake_times=(policy.deadline, policy.startup_deadline),
            tick=tick,
            every=reporter.tick_seconds(),
            clusters={MEMBERS: await self.connection_settings(members)} if members else None,
        )
        try:
            async with contextlib.aclosing(views):
                async for view in views:
                    now = reservation_clock.current().now()
                    unreachable = following.unreachable()
                    if unreachable is not None:
                        return self._event(observed, unreachable, clock)
                    if view is not None:
                        seen_any = True
                        problem = objects.malformed(view)
                        if problem is not None:
                            unreadable = Decision(
                                phase=Phase.FAILED,
                                terminal=True,
                                reason=Reason.MALFORMED_ANSWER,
                                message=f"the API server sent an object this provider cannot read: {problem}",
                            )
                            return self._event(observed, unreadable, clock)
                        observed = self.remembered(memory, observe(view))
                        if ended_tails is not None:
                            await ended_tails.read(self.members_client(), observed.pods)
                    elif not seen_any:
                        continue  # nothing listed yet: an empty view would read as "the reservation is gone"
                    decision = decide(observed, now=now, policy=policy)
                    # A deadline is decided on a fresh LIST; so is an end only the manager's mirror of a
                    # MultiKueue worker's Job reports (two clusters: the pods' watch may lag behind it).
                    mirrored = (
                        objects.members_elsewhere
                        and not decide(replace(observed, job=None), now=now, policy=policy).terminal
                    )
                    if decision.terminal and (decision.reason == Reason.DEADLINE or mirrored):
                        fresh = await following.read_now()
                        if fresh is not None and objects.malformed(fresh) is None:
                            observed = self.remembered(memory, observe(fresh))
                            decision = decide(observed, now=now, policy=policy)
                    client = self.members_client()
                    if await spot_nodes.found_shutting_down(decision, memory, client, self.log, self.gang_name):
                        observed = self.remembered(memory, observed)
                        decision = decide(observed, now=now, policy=policy)
                    clock.saw(decision.phase, now)
                    reporter.saw(observed, decision, now)
                    memory.remember(decision.members)
                    if decision.terminal:
                        decision = replace(decision, members=memory.ended(decision.members, now=now))
                        drain = await self.drain(client, memory, observed)
                        saved = dict(drain.saved_logs)
                        if ended_tails is not None:  # a MultiKueue worker: the rest of the log ranks now
                            await ended_tails.read(client, observed.pods, at_end=True)
                            saved = {**ended_tails.saved, **saved}
                        return self._event(
                            observed,
                            decision,
                            clock,
                            checkpoint=memory.checkpoint,
                            logs=tuple(sorted(saved.items())),
                            unread_reports=tuple(drain.unread),
                        )
        except errors.KubeError as error:
            if error.retryable:
                raise
            refused = Decision(
                phase=Phase.FAILED, terminal=True, reason=Reason.INVALID, message=f"the API server refused: {error}"
            )
            refusal = ApiRefusal(type=type(error).__name__, code=getattr(error, "code", None))
            return self._event(observed, refused, clock, api_error=refusal)
        raise RuntimeError("the watch ended without a terminal decision")  # views() never ends on its own

    async def drain(self, client: KubeClient, memory: member_history.RunMemory, observed: Observed) -> survivors.Drain:
        """A checkpointed gang's members still running are stopped and their reports read into
        ``memory`` (:mod:`.survivors`); the drain tells what else it read and what it could not."""
        drain = survivors.Drain(
            client,
            self.namespace,
            self.objects.pod_selector or "",
            memory,
            self.log,
            self.gang_name,
            log_ranks=self.arguments.log_ranks,
        )
        if memory.read_checkpoints and self.objects.pod_selector:
            await drain.run(observed.pods)
        return drain

    def members_client(self) -> KubeClient:
        """The shared client of the cluster the members' pods are watched on (their nodes, logs and
        drain go there too); the first watch's when no pod is watched."""
        watching = next((item for item in self.subscriptions if item.resource is PODS), self.subscriptions[0])
        return watching.reflector.client

    def remembered(self, memory: member_history.RunMemory, observed: Observed) -> Observed:
        """``observed`` with what ``memory`` keeps; a malformed termination message is logged, once."""
        observed, warnings = memory.see(observed)
        for warning in warnings:
            self.log.warning("Gang %s: %s", self.gang_name, warning)
        return observed

    async def read_now(self) -> dict[str, Objects] | None:
        """A fresh LIST of every watched kind (:meth:`FollowedWatches.read_now`)."""
        return await self.following.read_now()

    async def cleanup(self) -> None:
        """Leave the shared watches. Deletes nothing: cleanup runs on every exit, triggerer restarts
        included. Idempotent."""
        await self.following.leave()

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

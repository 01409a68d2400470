"""What both gang triggers share: their arguments, watches shared in the process raced against the
policy's deadlines, and a guarded ``on_kill``.

Both take one ``reservation.records.triggers.TriggerArguments`` (the stored format of their kwargs,
documented field by field there): ``serialize()`` returns its ``to_dict()``, the constructor reads
the kwargs with its tolerant ``from_dict``.

Every gang trigger waiting in one process follows one watch per (connection, namespace, kind) over one
client (:mod:`.following`, :mod:`kube.watch_registry`; a trigger rebuilt in another process joins that
one's). Each view of them goes through observe -> decide -> refine -> finish (:mod:`.decision_loop`):
a spot gang's member failure is decided after reading its spot nodes (:mod:`.spot_nodes`); a gang
with a checkpoint has its running members stopped and their reports read before the event
(:mod:`.survivors`).
Two copies at once (HA triggerers, apache/airflow#37180) only read, so they cost requests but change
nothing; ``cleanup()`` leaves the watches; ``on_kill()`` deletes, guarded so that a gang live
elsewhere survives (:mod:`.kill`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.shared_watch import Subscription
from airflow_provider_gang.kube.watch import Reflector
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.decision import Policy
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.records.events import GangEvent
from airflow_provider_gang.reservation.records.triggers import DeleteTarget, TriggerArguments
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers import kill
from airflow_provider_gang.triggers.decision_loop import DecisionLoop
from airflow_provider_gang.triggers.following import FollowedWatches
from airflow_provider_gang.triggers.observation import MEMBERS, GangObjects


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

    async def decide_until_terminal(self) -> GangEvent:
        """Watch the gang's objects, feed every change to ``decide`` and return the event of the first
        terminal decision (:mod:`.decision_loop`: observe -> decide -> refine -> finish). The policy's
        deadlines wake the loop even when nothing changes."""
        arguments, policy = self.arguments, self.policy()
        loop = DecisionLoop(
            arguments,
            self.objects,
            stage=self.stage,
            policy=policy,
            following=self.following,
            log=self.log,
            try_number=self.own_try,
        )
        members = arguments.members_kubernetes_conn_id
        tick = min(5.0, max(0.05, arguments.unreachable_seconds / 10))  # real seconds; the heartbeat's are the clock's
        views = self.following.views(
            await self.connection_settings(),
            ClientOptions.from_dict(arguments.client_options),
            namespace=self.namespace,
            watches=self.objects.watches(),
            watch_timeout_seconds=arguments.watch_timeout_seconds,
            wake_times=(policy.deadline, policy.startup_deadline),
            tick=tick,
            every=loop.reporter.tick_seconds(),
            clusters={MEMBERS: await self.connection_settings(members)} if members else None,
        )
        return await loop.until_terminal(views)

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

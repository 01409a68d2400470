"""What one gang trigger follows of the watches shared in its process, and how long they failed it.

A trigger subscribes to one shared watch per kind it needs (:mod:`kube.watch_registry`: one watch per
connection, namespace and kind, like client-go's ``SharedInformer``) and reads them as one stream of
views (:meth:`FollowedWatches.views`), woken also by the deadlines it must decide at. It decides a
deadline on a fresh LIST (:meth:`FollowedWatches.read_now`), and gives up on a cluster that has not
answered it for ``unreachable_seconds`` (:meth:`FollowedWatches.unreachable`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from airflow_provider_gang.kube import errors, watch_registry
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import Resource, by_key
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.shared_watch import Subscription
from airflow_provider_gang.kube.watch import Objects, Reflector
from airflow_provider_gang.reservation import clock
from airflow_provider_gang.reservation.decision import Decision
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.triggers.observation import trimmer
from airflow_provider_gang.triggers.wakeups import WakeSchedule

FRESH_READ_TIMEOUT_SECONDS = 30.0
"""Longest wait for the fresh LIST a deadline is decided on (capped by ``unreachable_seconds``)."""


class FollowedWatches:
    """The subscriptions of one trigger, from :meth:`views` until :meth:`leave`."""

    def __init__(self, log: Any, gang_name: str, *, unreachable_seconds: float) -> None:
        self.log = log
        self.gang_name = gang_name
        self.unreachable_seconds = unreachable_seconds
        self.subscriptions: list[Subscription] = []
        """What the trigger follows of the watches shared in its process, until :meth:`leave`."""
        self.reflectors: list[Reflector] = []
        """The reflectors of the shared watches it followed (their counters are the watch's), kept after."""

    async def views(
        self,
        settings: ConnectionSettings,
        options: ClientOptions,
        *,
        namespace: str,
        watches: Sequence[Mapping[str, str]],
        watch_timeout_seconds: int,
        wake_times: Sequence[float | None] = (),
        tick: float | None = None,
        every: float | None = None,
        clusters: Mapping[str, ConnectionSettings] | None = None,
    ) -> AsyncGenerator[dict[str, Objects] | None, None]:
        """List then watch every ``{"resource", "label_selector", "field_selector"}`` of ``watches``,
        on ``settings``' cluster or, for a watch with a ``"cluster"`` key, on ``clusters[that key]``'s.

        Yields ``{resource key: {name: object}}`` after every change, and ``None`` when one of
        ``wake_times`` (moments of ``reservation.clock``, e.g. the policy's deadlines) passes with no
        change, ``every`` clock seconds, and every ``tick`` real seconds without a change
        (:mod:`.wakeups`), so the caller decides again on the last view. The caller stops iterating
        once it has decided.
        """
        registry = watch_registry.for_running_loop()
        wakeup = watch_registry.Wakeup()
        for watch in watches:
            where = settings if "cluster" not in watch else (clusters or {})[watch["cluster"]]
            self.subscriptions.append(
                await registry.subscribe(
                    connection=watch_registry.connection_key(where.to_dict(), options.to_dict()),
                    connect=functools.partial(options.connect, where),
                    resource=by_key(watch["resource"]),
                    namespace=namespace,
                    label_selector=watch.get("label_selector", ""),
                    field_selector=watch.get("field_selector", ""),
                    watch_timeout_seconds=watch_timeout_seconds,
                    on_retry=self._log_retry,
                    notify=wakeup.set,
                    transform=trimmer(watch["resource"]),
                )
            )
        self.reflectors = [subscription.reflector for subscription in self.subscriptions]
        latest = watch_registry.LatestViews(self.subscriptions, wakeup)
        schedule = WakeSchedule(clock.current(), wake_times, tick, every=every)
        while True:
            for _ in range(schedule.passed()):
                yield None
            view = latest.take()
            if view is None:
                await wakeup.wait(schedule.timeout())
                view = latest.take()
            if schedule.waited(changed=view is not None):
                yield None
            elif view is not None:
                yield view

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
            self.log.warning(
                "Gang %s: could not read the gang afresh before deciding its deadline (%s); deciding on the last view",
                self.gang_name,
                error,
            )
            return None
        return {subscription.resource.key: view for subscription, view in zip(self.subscriptions, views, strict=True)}

    def client_of(self, resource: Resource) -> KubeClient:
        """The shared client of the first watch of ``resource``, else of the first watch (after :meth:`views`
        has subscribed)."""
        watching = next((item for item in self.subscriptions if item.resource is resource), self.subscriptions[0])
        return watching.client

    def unreachable(self) -> Decision | None:
        """The ``cluster_unreachable`` decision once a watch has had no answer for this trigger for
        ``unreachable_seconds`` in a row (:meth:`Subscription.failing_for`), else ``None``."""
        failing = max(self.subscriptions, key=lambda subscription: subscription.failing_for(), default=None)
        if failing is None or failing.failing_for() < self.unreachable_seconds:
            return None
        return Decision(
            phase=Phase.FAILED,
            terminal=True,
            reason=Reason.CLUSTER_UNREACHABLE,
            message=f"no answer from the API server for {failing.failing_for():.0f} s "
            f"(last: {failing.resource.plural}: {failing.reflector.last_error})",
        )

    def _log_retry(self, subscription: Subscription, error: errors.KubeError, delay: float) -> None:
        self.log.warning(
            "Gang %s: API server did not answer (%s: %s); retrying in %.1f s, no answer for %.0f s "
            "of the %.0f s allowed",
            self.gang_name,
            subscription.resource.plural,
            error,
            delay,
            subscription.failing_for(),
            self.unreachable_seconds,
        )

    async def leave(self) -> None:
        """Leave the shared watches (the last subscriber of a watch stops it, the last watch of a
        connection closes its client). Idempotent."""
        await watch_registry.for_running_loop().unsubscribe_all(self.subscriptions)

"""One wait of a gang trigger, from the first view of its objects to its one event.

Every view the shared watches yield (:meth:`.following.FollowedWatches.views`: after a change, and when
a deadline, the heartbeat or a tick passes with none) goes through four steps, in
:meth:`DecisionLoop.step`:

1. **observe** (:meth:`DecisionLoop.observe`): the view becomes the ``Observed`` snapshot, with what
   ``RunMemory`` keeps of pods deleted since; a view the classifiers cannot read ends the wait with
   reason ``malformed_answer``. On a MultiKueue worker the log tails of members seen ended are read
   before MultiKueue removes them (``survivors.EndedTails``). Until the first view, nothing is decided:
   an empty view would read as "the reservation is gone".
2. **decide**: ``reservation.decision.decide(observed, now=..., policy=...)``, the one pure decision.
3. **refine** (:meth:`DecisionLoop.refine`): a terminal decision the last view may be behind on is
   decided again - a deadline, or an end only the manager's mirror of a MultiKueue worker's Job reports
   (two clusters: the pods' watch may lag behind it), on a fresh LIST (``FollowedWatches.read_now``); a
   spot gang's member failure after reading its spot nodes (:mod:`.spot_nodes`).
4. **finish** (:meth:`DecisionLoop.finish`): the decision is recorded (phase clock, heartbeat, the
   members' history); a terminal one ends the run (:func:`.survivors.end_run`: survivors drained, the
   last log tails read) and becomes the event.

Before each view, a cluster that has not answered for ``unreachable_seconds`` ends the wait
(``FollowedWatches.unreachable``). A non-retryable API error (Forbidden, Unauthorized, a kind that is
not served) ends it with reason ``invalid``: the same spec on the same cluster cannot do better on a
new try; a retryable one is raised.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Mapping
from dataclasses import replace
from typing import Any

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.watch import Objects
from airflow_provider_gang.reservation import clock as reservation_clock
from airflow_provider_gang.reservation import member_history
from airflow_provider_gang.reservation.decision import Decision, Policy, decide
from airflow_provider_gang.reservation.observed import Observed, Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.records.events import ApiRefusal, GangEvent
from airflow_provider_gang.reservation.records.triggers import TriggerArguments
from airflow_provider_gang.triggers import spot_nodes, survivors
from airflow_provider_gang.triggers.events import PhaseClock
from airflow_provider_gang.triggers.following import FollowedWatches
from airflow_provider_gang.triggers.observation import GangObjects
from airflow_provider_gang.triggers.progress import WaitReporter

Views = AsyncGenerator[dict[str, Objects] | None, None]


def malformed_answer(problem: str) -> Decision:
    """The terminal decision on a view the classifiers cannot read (``problem`` names the object)."""
    return Decision(
        phase=Phase.FAILED,
        terminal=True,
        reason=Reason.MALFORMED_ANSWER,
        message=f"the API server sent an object this provider cannot read: {problem}",
    )


def refused(error: errors.KubeError) -> Decision:
    """The terminal decision on a non-retryable API error."""
    return Decision(
        phase=Phase.FAILED, terminal=True, reason=Reason.INVALID, message=f"the API server refused: {error}"
    )


class DecisionLoop:
    """One wait of one trigger (module docstring): what it has observed so far and the records it keeps."""

    def __init__(
        self,
        arguments: TriggerArguments,
        objects: GangObjects,
        *,
        stage: Stage,
        policy: Policy,
        following: FollowedWatches,
        log: logging.Logger | Any,
        try_number: int | None,
    ) -> None:
        self.arguments, self.objects, self.stage, self.policy = arguments, objects, stage, policy
        self.following, self.log, self.gang_name = following, log, arguments.gang_name
        self._snapshot = functools.partial(
            objects.observe,
            mode=arguments.mode,
            stage=stage,
            size=arguments.size,
            started_at=arguments.started_at,
            scheduling_gate=arguments.scheduling_gate if stage is Stage.RESERVATION else None,
            pods_from_job=arguments.members_from_job if stage is Stage.RUN else False,
        )
        self.observed: Observed = self._snapshot({})
        self.seen_any = False
        """Whether a view has arrived (the first LIST)."""
        self.clock = PhaseClock(arguments.started_at)
        self.memory = member_history.RunMemory(
            arguments.read_checkpoints and stage is Stage.RUN, preemption_taints=arguments.preemption_taints
        )
        """What pods deleted later take with them."""
        self.reporter = WaitReporter(
            log,
            self.gang_name,
            started_at=arguments.started_at,
            heartbeat_seconds=arguments.heartbeat_seconds,
            try_number=try_number,
            tries_allowed=arguments.tries_allowed,
            step_description=arguments.step_description,
        )
        on_worker = arguments.members_kubernetes_conn_id and objects.pod_selector and stage is Stage.RUN
        self.ended_tails = (
            survivors.EndedTails(
                arguments.namespace, objects.pod_selector or "", arguments.log_ranks, log, self.gang_name
            )
            if on_worker
            else None
        )
        """A MultiKueue worker's run: the log tails of members seen ended, read before MultiKueue removes them."""

    async def until_terminal(self, views: Views) -> GangEvent:
        """The event of the first terminal decision on ``views`` (closed when this returns)."""
        try:
            async with contextlib.aclosing(views):
                async for view in views:
                    event = await self.step(view)
                    if event is not None:
                        return event
        except errors.KubeError as error:
            if error.retryable:
                raise
            api_error = ApiRefusal(type=type(error).__name__, code=getattr(error, "code", None))
            return self.event(refused(error), api_error=api_error)
        raise RuntimeError("the watch ended without a terminal decision")  # views() never ends on its own

    async def step(self, view: Mapping[str, Objects] | None) -> GangEvent | None:
        """observe -> decide -> refine -> finish ``view`` (``None``: decide again on the last one); the
        event once a decision is terminal."""
        now = reservation_clock.current().now()
        unreachable = self.following.unreachable()
        if unreachable is not None:
            return self.event(unreachable)
        if view is not None:
            problem = await self.observe(view)
            if problem is not None:
                return self.event(malformed_answer(problem))
        elif not self.seen_any:
            return None
        decision = await self.refine(self.decide(now), now)
        return await self.finish(decision, now)

    async def observe(self, view: Mapping[str, Objects]) -> str | None:
        """Take ``view`` as what is observed now, or name what in it cannot be read (then nothing is taken)."""
        self.seen_any = True
        problem = self.objects.malformed(view)
        if problem is not None:
            return problem
        self.observed = self.remembered(self._snapshot(view))
        if self.ended_tails is not None:
            await self.ended_tails.read(self.members_client(), self.observed.pods)
        return None

    def decide(self, now: float) -> Decision:
        """``reservation.decision.decide`` on what is observed, under the trigger's policy."""
        return decide(self.observed, now=now, policy=self.policy)

    async def refine(self, decision: Decision, now: float) -> Decision:
        """``decision``, or the one decided again where the last view may be behind (module docstring)."""
        if decision.terminal and (decision.reason == Reason.DEADLINE or self.only_mirrored(now)):
            fresh = await self.following.read_now()
            if fresh is not None and self.objects.malformed(fresh) is None:
                self.observed = self.remembered(self._snapshot(fresh))
                decision = self.decide(now)
        if await spot_nodes.found_shutting_down(decision, self.memory, self.members_client(), self.log, self.gang_name):
            self.observed = self.remembered(self.observed)
            decision = self.decide(now)
        return decision

    def only_mirrored(self, now: float) -> bool:
        """Whether the members run on another cluster and, without the manager's mirror of their Job,
        what is observed would not be terminal."""
        if not self.objects.members_elsewhere:
            return False
        return not decide(replace(self.observed, job=None), now=now, policy=self.policy).terminal

    async def finish(self, decision: Decision, now: float) -> GangEvent | None:
        """Record ``decision``; if it is terminal, end the run and return its event."""
        self.clock.saw(decision.phase, now)
        self.reporter.saw(self.observed, decision, now)
        self.memory.remember(decision.members)
        if not decision.terminal:
            return None
        decision = replace(decision, members=self.memory.ended(decision.members, now=now))
        ended = await survivors.end_run(
            self.members_client(),
            self.observed.pods,
            self.memory,
            self.log,
            self.gang_name,
            namespace=self.arguments.namespace,
            pod_selector=self.objects.pod_selector,
            log_ranks=self.arguments.log_ranks,
            ended_tails=self.ended_tails,
        )
        return self.event(decision, checkpoint=self.memory.checkpoint, logs=ended.logs, unread_reports=ended.unread)

    def members_client(self) -> KubeClient:
        """The shared client of the cluster the members' pods are watched on (their nodes, logs and
        drain go there too)."""
        return self.following.client_of(PODS)

    def remembered(self, observed: Observed) -> Observed:
        """``observed`` with what ``memory`` keeps; a malformed termination message is logged, once."""
        observed, warnings = self.memory.see(observed)
        for warning in warnings:
            self.log.warning("Gang %s: %s", self.gang_name, warning)
        return observed

    def event(self, decision: Decision, **extra: Any) -> GangEvent:
        """The event that reports ``decision`` now; ``extra``: ``api_error``, ``checkpoint``, ``logs``,
        ``unread_reports``."""
        event_at = reservation_clock.current().now()
        self.clock.saw(decision.phase, event_at)
        return GangEvent.of_decision(
            decision,
            stage=self.observed.stage,
            gang_name=self.gang_name,
            namespace=self.arguments.namespace,
            mode=self.observed.mode,
            timings=self.clock.timings(event_at),
            **extra,
        )

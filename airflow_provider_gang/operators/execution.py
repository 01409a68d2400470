"""How one try of a ``GangTrainingOperator`` runs, from ``execute`` to the last trigger event.

::

    start ── check rendered arguments ── plan (start_by, adopt an intact gang, fallback step)
          ── precheck ── withdraw earlier tries' objects ── adopt-or-create the reservation
          ── wait: ReservationTrigger ──► reserved
    reserved ── failed? end ── launch all members at once (or release the gates)
          ── wait: GangRunTrigger ──► finished
    finished ── stream log_ranks' logs ── account GPU time ── delete (on_finish / failure) ── end

Every stage runs inside :meth:`TryRun.guarded`: whatever it raises, the try is ended once - its
objects torn down (best effort), its record written with a typed reason (``lifecycle.classify``),
and a typed Airflow exception raised (``failures``) - except ``TaskDeferred``, which is a wait, not
an end. A try is killed when ``on_kill`` ran (blocking mode) or Airflow raised into it
(``execution_timeout``): it is recorded as ``killed`` and ends with ``AirflowTaskTerminated``.

The stages take a frozen :class:`TrySettings` (the operator's arguments) and a
``waiting.Waiter``; they never read or write operator attributes. Every entry point reads the try's
state from the task state store (``lifecycle``), because ``dag.test()`` drops ``defer()`` kwargs and
a real triggerer keeps them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from airflow.sdk.exceptions import AirflowTaskTerminated, TaskDeferred

from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.links import RESERVATION_XCOM_KEY
from airflow_provider_gang.operators import gang_objects, plan, precheck, results
from airflow_provider_gang.operators.failures import failure
from airflow_provider_gang.operators.history import TryRecord
from airflow_provider_gang.operators.lifecycle import KILLING_EXCEPTIONS, TryLifecycle, classify
from airflow_provider_gang.operators.try_state import ReservedObject, TryState
from airflow_provider_gang.operators.waiting import Waiter
from airflow_provider_gang.reservation import clock, cost, fallback, validation
from airflow_provider_gang.reservation.decision import Decision
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.reservation import ReservationTrigger

DEFAULT_PROVISIONING_CLASS = validation.BEST_EFFORT_ATOMIC
UNLIMITED_RUN = timedelta(days=365)
"""Stand-in deadline for ``run_timeout=None``: the run trigger needs an absolute deadline."""

T = TypeVar("T")


@dataclass(frozen=True)
class TrySettings:
    """What a try needs of the operator's arguments (rendered), frozen for the try's duration.

    ``build_spec(name)`` is the gang as configured, before any fallback step; ``check_rendered()``
    raises ``GangArgumentError`` for an argument that is invalid once rendered; ``mode`` and ``size``
    describe a try refused before it had a spec.
    """

    kubernetes_conn_id: str
    namespace: str
    mode: str
    size: int
    ladder: tuple[fallback.FallbackStep, ...]
    build_spec: Callable[[str], GangSpec]
    check_rendered: Callable[[], None]
    reservation_timeout: timedelta
    startup_timeout: timedelta
    run_timeout: timedelta | None
    start_by: timedelta | None
    unreachable_timeout: timedelta
    on_finish: str
    log_ranks: Sequence[int] | str
    client_options: ClientOptions
    log: Any
    """The operator's logger (Airflow's structlog logger, or a stdlib one)."""


def start_try(settings: TrySettings, waiter: Waiter, context: Mapping[str, Any]) -> Any:
    """``execute``: plan the try, create (or adopt) its reservation, wait for it."""
    run = TryRun(settings, waiter, context)
    return run.guarded(run.start)


def on_reservation_event(settings: TrySettings, waiter: Waiter, context: Mapping[str, Any],
                         event: dict[str, Any]) -> Any:
    """``execute_reserved``: launch the members together, or end the try with the event's reason."""
    run = TryRun(settings, waiter, context)
    return run.guarded(lambda: run.reserved(event))


def on_run_event(settings: TrySettings, waiter: Waiter, context: Mapping[str, Any], event: dict[str, Any]) -> Any:
    """``execute_finished``: logs, accounting, clean-up; the summary on success."""
    run = TryRun(settings, waiter, context)
    return run.guarded(lambda: run.finished(event))


class TryRun:
    """One entry point's part of a try (see module docstring)."""

    def __init__(self, settings: TrySettings, waiter: Waiter, context: Mapping[str, Any]) -> None:
        self.settings, self.waiter, self.context = settings, waiter, context
        self.log = settings.log
        self.lifecycle = TryLifecycle(context)
        self.state: TryState | None = None
        self._connection: ConnectionSettings | None = None

    # -- plumbing -------------------------------------------------------------------------------

    def connection(self) -> ConnectionSettings:
        if self._connection is None:
            self._connection = GangHook(conn_id=self.settings.kubernetes_conn_id).connection_settings()
        return self._connection

    def cluster(self, work: Callable[[KubeClient], Awaitable[T]]) -> T:
        """Run ``work`` with a fresh client on a private event loop (operators are synchronous)."""

        async def main() -> T:
            async with await self.settings.client_options.connect(self.connection()) as client:
                return await work(client)

        return asyncio.run(main())

    def guarded(self, stage: Callable[[], T]) -> T:
        """Run ``stage``; if it raises anything but a deferral, end the try once (module docstring)."""
        try:
            return stage()
        except TaskDeferred:
            raise
        except BaseException as error:
            if self.lifecycle.ended:
                raise  # the try's own ending, already recorded
            reason, message = classify(error)
            if self.waiter.killed:
                reason, message = Reason.KILLED, "on_kill deleted the gang"
            ending = self.end_with(reason, message)
            if isinstance(error, KILLING_EXCEPTIONS):
                raise
            raise ending from error

    def end_with(self, reason: Reason, message: str) -> BaseException:
        """End the try with ``reason`` after an exception; the exception to raise."""
        if self.state is None:
            records = self.lifecycle.end_without_gang(attempt=self.lifecycle.try_number, reason=reason,
                                                      message=message, mode=self.settings.mode,
                                                      size=self.settings.size)
            return failure(reason, message, records)
        outcome = {"status": "failure", "reason": reason.value, "message": message}
        reservation_event = self.state.reservation_event or {}
        try:
            self.end(reservation_event=reservation_event, run_event=None, outcome=outcome)
        except BaseException as ended:  # end() always raises for a failed try
            return ended
        raise AssertionError("end() returned for a failed try")

    # -- stages ---------------------------------------------------------------------------------

    def start(self) -> Any:
        self.settings.check_rendered()
        ti, now = self.context["ti"], clock.current().now()
        start_deadline = plan.start_window_end(self.context, self.settings.start_by)
        in_progress = self.lifecycle.in_progress()
        chosen: tuple[plan.TryPlan, str] | None = None
        if in_progress is not None and in_progress.plan.attempt == ti.try_number:
            chosen = in_progress.plan, f"try {ti.try_number}: resuming gang {in_progress.plan.gang}"
        elif in_progress is not None:
            chosen = self._adopt_or_record(in_progress, start_deadline, now)
        records = self.lifecycle.finished()
        if chosen is None:
            try:
                chosen = plan.plan_try(
                    ti=ti, records=records, ladder=self.settings.ladder, build_spec=self.settings.build_spec,
                    reservation_timeout_seconds=self.settings.reservation_timeout.total_seconds(),
                    start_deadline=start_deadline, now=now,
                )
            except plan.NoTry as stop:
                self._withdraw_leftovers([record.gang for record in records])
                records = self.lifecycle.end_without_gang(attempt=ti.try_number, reason=stop.reason,
                                                          message=stop.message, mode=self.settings.mode,
                                                          size=self.settings.size)
                raise failure(stop.reason, stop.message, records) from stop
        try_plan, explanation = chosen
        self.log.info("Gang plan: %s", explanation)
        self.state = self.lifecycle.begin(try_plan)
        spec = try_plan.gang_spec()
        self.waiter.track(self.connection(), spec)
        earlier = [record.gang for record in records if record.gang and record.gang != try_plan.gang]

        async def prepare(client: KubeClient) -> dict[str, Any]:
            for warning in await precheck.precheck(client, spec):
                self.log.warning("Gang %s precheck: %s", spec.name, warning)
            withdrawn = await gang_objects.withdraw(client, spec.namespace, earlier, spec.mode)
            if withdrawn:
                self.log.info("Withdrew %d objects left by earlier tries %s", withdrawn, earlier)
            return await gang_objects.ensure_reservation(client, spec, owner_try=try_plan.attempt)

        facts = self.cluster(prepare)
        self.log.info("Reservation %s (%s, %d members, step: %s): %d objects created, the rest adopted",
                      try_plan.gang, spec.mode.value, spec.size, try_plan.step, facts["created"])
        self.state = self.lifecycle.update(
            self.state, owner_uid=facts["owner_uid"], job_uid=facts["job_uid"],
            objects=tuple(ReservedObject(*item) for item in facts["objects"]),
        )
        ti.xcom_push(key=RESERVATION_XCOM_KEY, value={
            "gang": try_plan.gang, "namespace": spec.namespace, "mode": spec.mode.value, "size": spec.size,
            "step": try_plan.step, "try": try_plan.attempt, "zone": spec.zone, "queue": spec.queue,
            "provisioning_class": spec.provisioning_class,
        })
        watch = gang_objects.watch_targets(spec, facts["job_uid"])
        trigger = ReservationTrigger(
            kubernetes_conn_id=self.settings.kubernetes_conn_id, gang_name=try_plan.gang, namespace=spec.namespace,
            deadline=try_plan.reservation_deadline, mode=spec.mode.value, size=spec.size,
            started_at=try_plan.requested_at, provisioning_request=watch.provisioning_request,
            workload_selector=watch.workload_selector, pod_selector=watch.gated_pod_selector,
            scheduling_gate=watch.scheduling_gate, deadline_reason=try_plan.deadline_reason,
            delete_on_kill=gang_objects.kill_targets(spec), try_number=try_plan.attempt,
            client_options=self.settings.client_options.to_dict(),
            unreachable_seconds=self.settings.unreachable_timeout.total_seconds(),
            tries_allowed=tries_allowed(ti), step_description=try_plan.step,
        )
        event = self.waiter.wait(trigger, resume_method="execute_reserved", deadline=try_plan.reservation_deadline,
                                 spec=spec)
        return self.reserved(event)

    def _adopt_or_record(self, stale: TryState, start_deadline: float | None, now: float) -> tuple[
            plan.TryPlan, str] | None:
        """An earlier try never finished: adopt its gang if intact and the window allows (rule 2 of
        ``operators.plan``), else record that try as killed; ``None`` when a new plan is needed."""
        spec = stale.plan.gang_spec()
        refusal: str | None = "the start window has passed"
        if plan.start_window_passed(start_deadline, now) is None:
            refusal = self.cluster(lambda client: gang_objects.adoption_refusal(
                client, spec, attempt=stale.plan.attempt, owner_uid=stale.owner_uid))
        if refusal is None:
            adopted = plan.adopt(stale.plan, try_number=self.lifecycle.try_number, start_deadline=start_deadline,
                                 reservation_timeout_seconds=self.settings.reservation_timeout.total_seconds(),
                                 now=now)
            self.lifecycle.end_without_gang(
                attempt=stale.plan.attempt, reason=Reason.WORKER_LOST, plan=stale.plan, mode=spec.mode.value,
                size=stale.size_run or spec.size,
                message=f"its worker stopped before the try finished; try {self.lifecycle.try_number} adopted "
                        "its intact gang")
            return adopted
        self.log.info("Try %d did not finish and its gang %s is not adopted: %s", stale.plan.attempt,
                      stale.plan.gang, refusal)
        self.lifecycle.end_without_gang(attempt=stale.plan.attempt, reason=Reason.KILLED, plan=stale.plan,
                                        message=f"the try did not finish and {refusal}", mode=spec.mode.value,
                                        size=stale.size_run or spec.size)
        return None

    def _withdraw_leftovers(self, gangs: list[str]) -> None:
        """Best effort, when no new try starts: delete whatever earlier tries left (their own clean-up
        may not have reached the API server), so the task never ends with a request still queued."""
        gangs = [gang for gang in gangs if gang]
        if not gangs:
            return
        try:
            withdrawn = self.cluster(lambda client: gang_objects.withdraw(
                client, self.settings.namespace, gangs, ReservationMode(self.settings.mode)))
        except Exception as error:  # the task fails anyway; the reason it fails matters more
            self.log.warning("Could not withdraw what earlier tries left: %s", error)
            return
        if withdrawn:
            self.log.info("Withdrew %d objects left by earlier tries", withdrawn)

    def _resume(self) -> TryState:
        state = self.lifecycle.in_progress()
        if state is None or state.plan.attempt != self.lifecycle.try_number:
            raise RuntimeError(f"try {self.lifecycle.try_number} resumed without its state in the task state store")
        self.state = state
        self.waiter.track(self.connection(), state.plan.gang_spec())
        return state

    def reserved(self, event: dict[str, Any]) -> Any:
        state = self._resume()
        spec = state.plan.gang_spec()
        self.state = state = self.lifecycle.update(state, reservation_event=_slim(event))
        if event.get("status") != "success" or self.waiter.killed:
            return self.end(reservation_event=event, run_event=None)
        size = int(event.get("admitted_count") or spec.size)
        now = clock.current().now()

        async def launch(client: KubeClient) -> Decision | None:
            told = await gang_objects.publish_world(client, spec, size=size, owner_uid=str(state.owner_uid))
            if told is not None:
                self.log.info("Gang %s: %s", spec.name, told)
            recheck = await gang_objects.recheck_reservation(client, spec, started_at=state.plan.requested_at, now=now)
            if recheck is not None and recheck.phase is not Phase.RESERVED:
                return recheck
            launched = await gang_objects.launch(client, spec, size=size, owner_uid=str(state.owner_uid))
            self.log.info("Gang %s: launched %d members together (%s)", spec.name, size, launched)
            return None

        lost = self.cluster(launch)
        if lost is not None:
            self.log.warning("Gang %s: the reservation ended before launch: %s", spec.name, lost.message)
            ended = {**event, **lost.as_event(), "status": "failure"}
            return self.end(reservation_event=event, run_event=None, outcome=ended)
        run_limit = self.settings.run_timeout or UNLIMITED_RUN
        deadline = now + (self.settings.startup_timeout + run_limit).total_seconds()
        self.state = state = self.lifecycle.update(state, launched_at=now, size_run=size)
        watch = gang_objects.watch_targets(spec, state.job_uid)
        trigger = GangRunTrigger(
            kubernetes_conn_id=self.settings.kubernetes_conn_id, gang_name=spec.name, namespace=spec.namespace,
            deadline=deadline, mode=spec.mode.value, size=size, started_at=now, pod_selector=watch.member_selector,
            provisioning_request=watch.provisioning_request, workload_selector=watch.workload_selector,
            startup_deadline=now + self.settings.startup_timeout.total_seconds(),
            read_checkpoints=spec.checkpoint is not None,
            delete_on_kill=gang_objects.kill_targets(spec), try_number=state.plan.attempt,
            client_options=self.settings.client_options.to_dict(),
            unreachable_seconds=self.settings.unreachable_timeout.total_seconds(),
            tries_allowed=tries_allowed(self.context["ti"]), step_description=state.plan.step,
        )
        run_event = self.waiter.wait(trigger, resume_method="execute_finished", deadline=deadline, spec=spec)
        return self.finished(run_event)

    def finished(self, event: dict[str, Any]) -> Any:
        state = self._resume()
        return self.end(reservation_event=state.reservation_event or {}, run_event=event)

    def end(self, *, reservation_event: Mapping[str, Any], run_event: Mapping[str, Any] | None,
            outcome: Mapping[str, Any] | None = None) -> Any:
        """Close the try: logs, teardown (always on failure; on success unless ``on_finish="keep"``),
        record; the summary on success, else the typed exception is raised."""
        assert self.state is not None
        state, spec = self.state, self.state.plan.gang_spec()
        killed = self.waiter.killed
        if killed:
            outcome = {"status": "failure", "reason": Reason.KILLED.value, "message": "on_kill deleted the gang"}
        final = outcome or (run_event if run_event is not None else reservation_event)
        succeeded = outcome is None and run_event is not None and run_event.get("status") == "success"
        ranks = results.ranks_to_log(self.settings.log_ranks, state.size_run or spec.size)

        async def finish(client: KubeClient) -> tuple[dict[int, str], int]:
            logs = await gang_objects.read_logs(client, spec, ranks) if run_event is not None else {}
            keep = succeeded and self.settings.on_finish == "keep"
            return logs, await gang_objects.teardown(client, spec, keep_members=keep)

        try:
            logs, deleted = self.cluster(finish)
        except Exception as error:  # the try ends all the same; what is left is withdrawn by the next try
            self.log.warning("Gang %s: clean-up incomplete (%s); the next try withdraws what is left", spec.name,
                             error)
            logs, deleted = {}, 0
        for rank, text in sorted(logs.items()):
            for line in text.splitlines():
                self.log.info("[rank %d] %s", rank, line)
        if deleted:
            self.log.info("Gang %s: deleted %d objects", spec.name, deleted)
        record = results.try_record(state, spec, reservation_event, run_event, final,
                                    gpus=cost.gpus_per_member(spec), now=clock.current().now())
        records = self.lifecycle.end(record)
        for line in results.story(records):
            self.log.info("%s", line)
        if succeeded:
            return results.summary(state.plan, spec, record, records, logs)
        return self._raise_ended(record, records, killed)

    def _raise_ended(self, record: TryRecord, records: list[TryRecord], killed: bool) -> Any:
        message = f"gang {record.gang}: {record.message}"
        if killed:
            raise AirflowTaskTerminated(f"{Reason.KILLED.value}: {message}")
        raise failure(Reason(record.outcome), message, records)


def tries_allowed(ti: Any) -> int | None:
    """``M`` of "try N of M": ``max_tries + 1``, as Airflow's own failure e-mail counts (``"Try
    {{try_number}} out of {{max_tries + 1}}"``, ``airflow/sdk/execution_time/task_runner.py``, 3.3);
    ``None`` when the task instance does not say."""
    max_tries = getattr(ti, "max_tries", None)
    return int(max_tries) + 1 if isinstance(max_tries, int) and max_tries >= 0 else None


def _slim(event: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of an event kept in the task state store (members only matter for the run stage)."""
    return {key: value for key, value in event.items() if key != "members"}

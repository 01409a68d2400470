"""How one try of a ``GangTrainingOperator`` runs, from ``execute`` to the last trigger event.

::

    execute ── check rendered arguments ── plan (start_by, adopt, fallback step) ── precheck
            ── withdraw earlier tries' objects ── adopt-or-create the reservation
            ── wait: ReservationTrigger ──► execute_reserved
    execute_reserved ── failed? end the try ── launch all members at once (or release the gates)
            ── wait: GangRunTrigger ──► execute_finished
    execute_finished ── stream log_ranks' logs ── account GPU time ── delete (on_finish / failure)
            ── success: XCom summary │ failure: typed exception (failures.py)

"wait" is ``self.defer()`` when ``deferrable``; otherwise the same trigger runs in the worker until
its first event and the same continuation is called, so both modes run the same decision code
(STYLE point 5). Every entry point reads the try's plan from the task state store (``plan.py``),
because ``dag.test()`` drops ``defer()`` kwargs and a real triggerer keeps them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.kube import errors as kube_errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.links import RESERVATION_XCOM_KEY
from airflow_provider_gang.operators import gang_objects, results
from airflow_provider_gang.operators.arguments import GangArgumentError
from airflow_provider_gang.operators.failures import failure
from airflow_provider_gang.operators.history import TryHistory, TryRecord
from airflow_provider_gang.operators.plan import NoTry, TryPlan, effective_ladder, plan_try
from airflow_provider_gang.reservation import cost, validation
from airflow_provider_gang.reservation.decision import Decision
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.reservation import ReservationTrigger

if TYPE_CHECKING:
    from airflow_provider_gang.operators.training import GangTrainingOperator

DEFAULT_PROVISIONING_CLASS = validation.BEST_EFFORT_ATOMIC
UNLIMITED_RUN = timedelta(days=365)
"""Stand-in deadline for ``run_timeout=None``: the run trigger needs an absolute deadline."""
DEFER_SLACK = timedelta(minutes=2)
"""Added to a trigger's own deadline for Airflow's ``defer(timeout=)``: the trigger reports first."""

T = TypeVar("T")


def _run(settings: ConnectionSettings, work: Callable[[KubeClient], Awaitable[T]]) -> T:
    """Run ``work`` with a fresh client on a private event loop (operators are synchronous)."""

    async def main() -> T:
        async with await KubeClient.connect(settings) as client:
            return await work(client)

    return asyncio.run(main())


def _settings(operator: GangTrainingOperator) -> ConnectionSettings:
    return GangHook(conn_id=operator.kubernetes_conn_id).connection_settings()


def start_try(operator: GangTrainingOperator, context: Mapping[str, Any]) -> Any:
    """``execute``: plan the try, create (or adopt) its reservation, wait for it."""
    try:
        operator.check_arguments(rendered=True)
    except GangArgumentError as error:
        raise failure(Reason.INVALID, str(error), []) from error
    ti = context["ti"]
    history = TryHistory(context)
    records = history.finished()
    try:
        plan, explanation = plan_try(
            ti=ti, context=context, records=records, current=history.current(),
            ladder=effective_ladder(operator.fallbacks, operator.retries or 0), build_spec=operator.build_spec,
            reservation_timeout_seconds=operator.reservation_timeout.total_seconds(), start_by=operator.start_by,
            now=time.time(),
        )
    except NoTry as stop:
        _withdraw_leftovers(operator, records)
        raise failure(stop.reason, stop.message, records) from stop
    operator.log.info("Gang plan: %s", explanation)
    spec = plan.gang_spec()
    settings = _settings(operator)
    history.set_current(**plan.to_dict())
    earlier = [record.gang for record in records if record.gang != plan.gang]

    async def prepare(client: KubeClient) -> dict[str, Any]:
        await gang_objects.precheck(client, spec)
        withdrawn = await gang_objects.withdraw(client, spec.namespace, earlier)
        if withdrawn:
            operator.log.info("Withdrew %d objects left by earlier tries %s", withdrawn, earlier)
        facts = await gang_objects.ensure_reservation(client, spec, owner_try=plan.attempt)
        operator.log.info("Reservation %s (%s, %d members, step: %s): %d objects created, the rest adopted",
                          plan.gang, spec.mode.value, spec.size, plan.step, facts["created"])
        return facts

    facts = _guarded(lambda: _run(settings, prepare), records, history, plan)
    history.set_current(owner_uid=facts["owner_uid"], job_uid=facts["job_uid"])
    ti.xcom_push(key=RESERVATION_XCOM_KEY, value={
        "gang": plan.gang, "namespace": spec.namespace, "mode": spec.mode.value, "size": spec.size,
        "step": plan.step, "try": plan.attempt, "zone": spec.zone, "queue": spec.queue,
        "provisioning_class": spec.provisioning_class,
    })
    watch = gang_objects.watch_targets(spec, facts["job_uid"])
    trigger = ReservationTrigger(
        connection=settings.to_dict(), gang_name=plan.gang, namespace=spec.namespace,
        deadline=plan.reservation_deadline, mode=spec.mode.value, size=spec.size, started_at=plan.requested_at,
        provisioning_request=watch.provisioning_request, workload_selector=watch.workload_selector,
        pod_selector=watch.gated_pod_selector, scheduling_gate=watch.scheduling_gate,
        deadline_reason=plan.deadline_reason, delete_on_kill=gang_objects.kill_targets(spec), try_number=plan.attempt,
    )
    return _wait(operator, context, trigger, "execute_reserved", plan.reservation_deadline, spec)


def _withdraw_leftovers(operator: GangTrainingOperator, records: list[TryRecord]) -> None:
    """Best effort, when no new try starts: delete whatever earlier tries left (their own clean-up
    may not have reached the API server), so the task never ends with a request still queued."""
    if not records:
        return
    namespace = str(operator.namespace)
    try:
        withdrawn = _run(_settings(operator), lambda client: gang_objects.withdraw(
            client, namespace, [record.gang for record in records]))
    except Exception as error:  # the task fails anyway; the reason it fails matters more
        operator.log.warning("Could not withdraw what earlier tries left: %s", error)
        return
    if withdrawn:
        operator.log.info("Withdrew %d objects left by earlier tries", withdrawn)


def on_reservation_event(operator: GangTrainingOperator, context: Mapping[str, Any], event: dict[str, Any]) -> Any:
    """``execute_reserved``: launch the members together, or end the try with the event's reason."""
    history, plan = _resume(context)
    spec = plan.gang_spec()
    settings = _settings(operator)
    history.set_current(reservation_event=_slim(event))
    if event.get("status") != "success":
        return _end_try(operator, context, history, plan, settings, event, run_event=None)
    size = int(event.get("admitted_count") or spec.size)
    now = time.time()

    current = history.current() or {}

    async def launch(client: KubeClient) -> Decision | None:
        recheck = await gang_objects.recheck_reservation(client, spec, started_at=plan.requested_at, now=now)
        if recheck is not None and recheck.phase is not Phase.RESERVED:
            return recheck
        launched = await gang_objects.launch(client, spec, size=size, owner_uid=str(current.get("owner_uid")))
        operator.log.info("Gang %s: launched %d members together (%s)", plan.gang, size, launched)
        return None

    lost = _guarded(lambda: _run(settings, launch), history.finished(), history, plan)
    if lost is not None:
        operator.log.warning("Gang %s: the reservation ended before launch: %s", plan.gang, lost.message)
        ended = {**event, **lost.as_event(), "status": "failure"}
        return _end_try(operator, context, history, plan, settings, event, run_event=None, outcome=ended)
    run_limit = operator.run_timeout or UNLIMITED_RUN
    deadline = now + (operator.startup_timeout + run_limit).total_seconds()
    history.set_current(launched_at=now, size_run=size)
    watch = gang_objects.watch_targets(spec, current.get("job_uid"))
    trigger = GangRunTrigger(
        connection=settings.to_dict(), gang_name=plan.gang, namespace=spec.namespace, deadline=deadline,
        mode=spec.mode.value, size=size, started_at=now, pod_selector=watch.member_selector,
        provisioning_request=watch.provisioning_request, workload_selector=watch.workload_selector,
        startup_deadline=now + operator.startup_timeout.total_seconds(),
        delete_on_kill=gang_objects.kill_targets(spec), try_number=plan.attempt,
    )
    return _wait(operator, context, trigger, "execute_finished", deadline, spec)


def on_run_event(operator: GangTrainingOperator, context: Mapping[str, Any], event: dict[str, Any]) -> Any:
    """``execute_finished``: logs, accounting, clean-up; the summary on success."""
    history, plan = _resume(context)
    settings = _settings(operator)
    reservation_event = (history.current() or {}).get("reservation_event") or {}
    return _end_try(operator, context, history, plan, settings, reservation_event, run_event=event)


def _end_try(
    operator: GangTrainingOperator,
    context: Mapping[str, Any],
    history: TryHistory,
    plan: TryPlan,
    settings: ConnectionSettings,
    reservation_event: Mapping[str, Any],
    *,
    run_event: Mapping[str, Any] | None,
    outcome: Mapping[str, Any] | None = None,
) -> Any:
    """Close the try: logs, teardown (always on failure; on success unless ``on_finish="keep"``), record."""
    spec = plan.gang_spec()
    final = outcome or (run_event if run_event is not None else reservation_event)
    succeeded = outcome is None and run_event is not None and run_event.get("status") == "success"
    current = history.current() or {}
    ranks = results.ranks_to_log(operator.log_ranks, int(current.get("size_run") or spec.size))

    async def finish(client: KubeClient) -> tuple[dict[int, str], int]:
        logs = await gang_objects.read_logs(client, spec, ranks) if run_event is not None else {}
        deleted = 0
        if not succeeded or operator.on_finish == "delete":
            deleted = await gang_objects.teardown(client, spec)
        return logs, deleted

    try:
        logs, deleted = _run(settings, finish)
    except kube_errors.KubeError as error:
        operator.log.warning("Gang %s: clean-up incomplete (%s); the next try withdraws what is left", plan.gang,
                             error)
        logs, deleted = {}, 0
    for rank, text in sorted(logs.items()):
        for line in text.splitlines():
            operator.log.info("[rank %d] %s", rank, line)
    if deleted:
        operator.log.info("Gang %s: deleted %d objects", plan.gang, deleted)
    record = results.try_record(plan, spec, current, reservation_event, run_event, final,
                                gpus=cost.gpus_per_member(spec), now=time.time())
    history.record(record)
    records = history.finished()
    if succeeded:
        return results.summary(plan, spec, record, records)
    reason = Reason(final.get("reason") or Reason.INVALID.value)
    message = str(final.get("message") or "")
    raise failure(reason, f"gang {plan.gang}: {message}", records)


def _resume(context: Mapping[str, Any]) -> tuple[TryHistory, TryPlan]:
    history = TryHistory(context)
    current = history.current()
    if current is None:
        raise failure(Reason.INVALID, "resumed without the try's plan in the task state store", history.finished())
    return history, TryPlan.from_dict(current)


def _slim(event: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of an event kept in the task state store (members only matter for the run stage)."""
    return {key: value for key, value in event.items() if key != "members"}


def _guarded(action: Callable[[], T], records: Any, history: TryHistory, plan: TryPlan) -> T:
    """Run a cluster action; map kube errors to typed failures (precheck and permissions never retry)."""
    try:
        return action()
    except gang_objects.PrecheckFailed as error:
        history.set_current(precheck_failed=str(error))
        raise failure(Reason.INVALID, str(error), list(records)) from error
    except kube_errors.KubeError as error:
        reason = Reason.PROVISIONING_FAILED if error.retryable else Reason.INVALID
        raise failure(reason, f"gang {plan.gang}: Kubernetes API: {error}", list(records)) from error


def _wait(operator: GangTrainingOperator, context: Mapping[str, Any], trigger: Any, method: str,
          deadline: float, spec: GangSpec) -> Any:
    """Defer to ``trigger`` or, in blocking mode, run it here until its first event (``spec`` is kept
    for ``on_kill`` meanwhile)."""
    if operator.deferrable:
        timeout = timedelta(seconds=max(1.0, deadline - time.time())) + DEFER_SLACK
        operator.defer(trigger=trigger, method_name=method, timeout=timeout)
    operator.inline_gang = (ConnectionSettings.from_dict(trigger.connection), spec)
    try:
        event = asyncio.run(_first_event(trigger))
    finally:
        operator.inline_gang = None
    return getattr(operator, method)(context, event)


async def _first_event(trigger: Any) -> dict[str, Any]:
    """The payload of the trigger's first event; the trigger's own deadline bounds the wait."""
    events = trigger.run()
    try:
        event = await anext(events)
    finally:
        await events.aclose()
        await trigger.cleanup()
    return dict(event.payload)


def kill(operator: GangTrainingOperator) -> None:
    """Blocking-mode ``on_kill``: delete every object of the gang whose trigger runs in this worker.

    Uses its own thread, loop and client: ``on_kill`` is called while the worker's loop may be busy
    running the trigger. A deferred task has no worker; its trigger's ``on_kill`` does the same.
    """
    active = getattr(operator, "inline_gang", None)
    if active is None:
        return
    settings, spec = active

    def delete() -> None:
        deleted = _run(settings, lambda client: gang_objects.teardown(client, spec))
        operator.log.info("on_kill: deleted %d objects of gang %s", deleted, spec.name)

    worker = threading.Thread(target=delete, name="gang-on-kill", daemon=True)
    worker.start()
    worker.join(timeout=60)

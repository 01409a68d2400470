"""The first stage of a try: plan it, prepare the cluster, create (or adopt) its reservation, wait.

::

    start ── rendered arguments valid? ── plan (start_by, adopt an intact gang, fallback step)
          ── reservation="auto": the mode, from the discovery of the try's cluster
          ── precheck (and whether a kueue queue dispatches through MultiKueue)
          ── withdraw earlier tries' objects ── adopt-or-create the reservation
          ── wait: ReservationTrigger ──► reserved (operators.launching)

An earlier try still recorded as in progress is adopted when its gang is intact
(``reservation.tries.plan`` rule 2), on the cluster it was created on, else recorded as killed
before a new plan is made. The try runs on the cluster its plan names (an ``OtherCluster`` step's,
else the operator's); earlier tries' gangs on other clusters are withdrawn there
(``operators.clusters``) while this try prepares its own. A new ``auto`` plan takes its mode from
the discovery of the cluster it runs on (``reservation.tries.auto_mode``), before the plan is stored.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from airflow_provider_gang.hooks import (
    creation,
    deletion,
    inspection,
    precheck,
    topology_check,
    topology_reads,
    workload_api_check,
)
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.links import RESERVATION_XCOM_KEY
from airflow_provider_gang.operators import clusters, launching
from airflow_provider_gang.operators.failures import failure
from airflow_provider_gang.operators.try_run import TryRun
from airflow_provider_gang.reservation import clock, multikueue
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import MultiKueueDispatch, TryPlan, TryRecord, TryState
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.tries import auto_mode, plan
from airflow_provider_gang.triggers.reservation import ReservationTrigger


def start(run: TryRun) -> Any:
    """``execute``: plan the try, create (or adopt) its reservation, wait for it."""
    settings = run.settings
    if settings.argument_error is not None:
        raise settings.argument_error
    assert settings.configured is not None  # set whenever argument_error is not
    ti, now = run.context["ti"], clock.current().now()
    start_deadline = plan.start_window_end(run.context, settings.start_by)
    in_progress = run.lifecycle.in_progress()
    chosen: tuple[TryPlan, str] | None = None
    if in_progress is not None and in_progress.plan.attempt == ti.try_number:
        chosen = in_progress.plan, f"try {ti.try_number}: resuming gang {in_progress.plan.gang}"
    elif in_progress is not None:
        chosen = _adopt_or_record(run, in_progress, start_deadline, now)
    records = run.lifecycle.finished()
    if chosen is None:
        try:
            chosen = plan.plan_try(
                ti=ti,
                records=records,
                ladder=settings.ladder,
                configured=settings.configured,
                reservation_timeout_seconds=settings.reservation_timeout.total_seconds(),
                start_deadline=start_deadline,
                now=now,
                kubernetes_conn_id=settings.kubernetes_conn_id,
            )
        except plan.NoTry as stop:
            _withdraw_leftovers(run, records)
            records = run.lifecycle.end_without_gang(
                attempt=ti.try_number, reason=stop.reason, message=stop.message, mode=settings.mode, size=settings.size
            )
            raise failure(stop.reason, stop.message, records) from stop
        if settings.auto_reservation:
            chosen = _choose_mode(run, *chosen)
    try_plan, explanation = chosen
    run.log.info("Gang plan: %s", explanation)
    connection = clusters.resolve_cluster(run, try_plan)
    run.state = run.lifecycle.begin(try_plan)
    spec = try_plan.spec
    run.waiter.track(connection, spec)
    places = clusters.places_of(run, [record for record in records if record.gang != try_plan.gang])
    here = clusters.Place(run.conn_id_of(try_plan), spec.namespace, spec.mode)
    earlier = places.get(here, [])
    elsewhere = clusters.withdraw_elsewhere(run, places, here)

    async def prepare(client: KubeClient) -> tuple[GangSpec, str | None, str | None]:
        checked = await precheck.precheck(client, spec)
        for warning in checked.warnings:
            run.log.warning("Gang %s precheck: %s", spec.name, warning)
        withdrawn = await deletion.withdraw(client, spec.namespace, earlier, spec.mode)
        if withdrawn:
            run.log.info("Withdrew %d objects left by earlier tries %s", withdrawn, earlier)
        placed, note = await topology_reads.placed(client, spec)
        return placed, note, checked.multikueue_check

    try:
        placed, note, dispatching = run.cluster(prepare)
        if note is not None:
            try_plan = replace(try_plan, spec=placed)
            run.state = run.lifecycle.update(run.state, plan=try_plan, topology_note=note)
            run.log.info("Gang %s topology: %s", spec.name, topology_line(placed, note))
        spec = placed
        created = spec if dispatching is None else multikueue.dispatched_spec(spec)
        facts = run.cluster(
            lambda client: creation.ensure_reservation(
                client, created, owner_try=try_plan.attempt, multikueue=dispatching is not None
            )
        )
    finally:
        if elsewhere is not None:
            elsewhere.join(timeout=clusters.WITHDRAW_TIMEOUT_SECONDS)
    if dispatching is not None:
        run.log.info(
            "Gang %s: LocalQueue %s dispatches through MultiKueue (admission check %r): the Job runs on the worker "
            "cluster that admits it",
            spec.name,
            spec.queue,
            dispatching,
        )
    if created != spec:
        run.log.info("Gang %s: %s", spec.name, multikueue.full_size_note(spec))
        try_plan, spec = replace(try_plan, spec=created), created
        run.state = run.lifecycle.update(run.state, plan=try_plan)
    run.log.info(
        "Reservation %s (%s, %d members, step: %s, cluster %s): %d objects created, the rest adopted",
        try_plan.gang,
        spec.mode.value,
        spec.size,
        try_plan.step,
        here.conn_id,
        facts.created,
    )
    run.state = run.lifecycle.update(
        run.state,
        owner_uid=facts.owner_uid,
        job_uid=facts.job_uid,
        objects=facts.objects,
        multikueue=None if dispatching is None else MultiKueueDispatch(admission_check=dispatching),
    )
    ti.xcom_push(
        key=RESERVATION_XCOM_KEY,
        value={
            "gang": try_plan.gang,
            "namespace": spec.namespace,
            "mode": spec.mode.value,
            "size": spec.size,
            "step": try_plan.step,
            "try": try_plan.attempt,
            "kubernetes_conn_id": here.conn_id,
            "zone": spec.zone,
            "queue": spec.queue,
            "provisioning_class": spec.provisioning_class,
        },
    )
    watch = inspection.watch_targets(spec, facts.job_uid)
    arguments = run.trigger_arguments(
        try_plan,
        job_uid=facts.job_uid,
        size=spec.size,
        started_at=try_plan.requested_at,
        deadline=try_plan.reservation_deadline,
        pod_selector=watch.gated_pod_selector,
        scheduling_gate=watch.scheduling_gate,
        deadline_reason=try_plan.deadline_reason,
    )
    trigger = ReservationTrigger.of(arguments)
    event = run.waiter.wait(trigger, deadline=try_plan.reservation_deadline, spec=spec)
    return launching.reserved(run, event)


def topology_line(spec: GangSpec, note: str) -> str:
    """The log line of a gang's topology: the label, what the room said, and the pin (if any)."""
    kind = "required" if spec.required_topology is not None else "preferred"
    placement = spec.placement
    if placement is None:
        return f"{kind} {spec.topology_label}: {note}"
    where = ", ".join(placement.domains)
    pin = f"asking for capacity in {where}" if placement.grows else f"members pinned to {where}"
    return f"{kind} {spec.topology_label}: {note}; {pin}"


def _choose_mode(run: TryRun, new_plan: TryPlan, explanation: str) -> tuple[TryPlan, str]:
    """A new ``auto`` plan in the mode its cluster serves; what was chosen and why joins the
    explanation the task log prints."""
    conn_id = run.conn_id_of(new_plan)
    served = run.cluster(workload_api_check.is_served, conn_id=conn_id)
    topology_served = True
    if served and new_plan.spec.required_topology is not None:
        workload = auto_mode.as_workload(new_plan.spec)
        refusal = run.cluster(lambda client: topology_check.serves_workload_topology(client, workload), conn_id=conn_id)
        topology_served = refusal is None
    chosen, why = auto_mode.choose(new_plan, pod_groups_served=served, conn_id=conn_id, topology_served=topology_served)
    return chosen, f"{explanation}; {why}"


def _adopt_or_record(
    run: TryRun, stale: TryState, start_deadline: float | None, now: float
) -> tuple[TryPlan, str] | None:
    """An earlier try never finished: adopt its gang if intact and the window allows (rule 2 of
    ``reservation.tries.plan``), else record that try as killed; ``None`` when a new plan is needed."""
    spec = stale.plan.spec
    refusal: str | None = "the start window has passed"
    if plan.start_window_passed(start_deadline, now) is None:
        refusal = run.cluster(
            lambda client: inspection.adoption_refusal(
                client, spec, attempt=stale.plan.attempt, owner_uid=stale.owner_uid
            ),
            conn_id=run.conn_id_of(stale.plan),
        )
    if refusal is None:
        adopted = plan.adopt(
            stale.plan,
            try_number=run.lifecycle.try_number,
            start_deadline=start_deadline,
            reservation_timeout_seconds=run.settings.reservation_timeout.total_seconds(),
            now=now,
        )
        run.lifecycle.end_without_gang(
            attempt=stale.plan.attempt,
            reason=Reason.WORKER_LOST,
            plan=stale.plan,
            mode=spec.mode.value,
            size=stale.size_run or spec.size,
            message=f"its worker stopped before the try finished; try {run.lifecycle.try_number} adopted "
            "its intact gang",
        )
        return adopted
    run.log.info(
        "Try %d did not finish and its gang %s is not adopted: %s", stale.plan.attempt, stale.plan.gang, refusal
    )
    run.lifecycle.end_without_gang(
        attempt=stale.plan.attempt,
        reason=Reason.KILLED,
        plan=stale.plan,
        message=f"the try did not finish and {refusal}",
        mode=spec.mode.value,
        size=stale.size_run or spec.size,
    )
    return None


def _withdraw_leftovers(run: TryRun, records: list[TryRecord]) -> None:
    """Best effort, when no new try starts: delete whatever earlier tries left, on every cluster they
    ran on (their own clean-up may not have reached the API server), so the task never ends with a
    request still queued."""
    clusters.withdraw_everywhere(run, records)

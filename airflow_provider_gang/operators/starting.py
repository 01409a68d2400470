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

from dataclasses import dataclass, replace
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
from airflow_provider_gang.reservation.records.tries import (
    MultiKueueDispatch,
    ReservationFacts,
    TryPlan,
    TryRecord,
    TryState,
)
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.tries import auto_mode, plan
from airflow_provider_gang.triggers.reservation import ReservationTrigger


@dataclass(frozen=True)
class Reserved:
    """A try's reservation as made by :func:`reserve`: its state as stored, its gang as placed (``spec``) and as
    created (``created``: the copy a MultiKueue manager dispatches, when ``dispatching`` names the
    admission check its queue dispatches through; else ``spec``), what ``creation.ensure_reservation``
    found or made, and the place of the try's cluster."""

    state: TryState
    spec: GangSpec
    created: GangSpec
    facts: ReservationFacts
    dispatching: str | None
    here: clusters.Place

    @property
    def plan(self) -> TryPlan:
        return self.state.plan


def start(run: TryRun) -> Any:
    """``execute``: plan the try, create (or adopt) its reservation, wait for it (module docstring)."""
    if run.settings.argument_error is not None:
        raise run.settings.argument_error
    try_plan, records = choose_plan(run)
    connection = clusters.resolve_cluster(run, try_plan)
    run.state = state = run.lifecycle.begin(try_plan)
    run.waiter.track(connection, try_plan.spec)
    reserved = record_reservation(run, reserve(run, state, records))
    push_reservation_xcom(run, reserved)
    return wait_for_reservation(run, reserved)


def choose_plan(run: TryRun) -> tuple[TryPlan, list[TryRecord]]:
    """This try's plan, logged with why, and the records of the finished tries: this try resumed (its
    worker restarted), an earlier unfinished try's intact gang adopted (else that try recorded as
    killed), or a new plan (:func:`_new_plan`)."""
    assert run.settings.configured is not None  # set whenever argument_error is not
    ti, now = run.context["ti"], clock.current().now()
    start_deadline = plan.start_window_end(run.context, run.settings.start_by)
    in_progress = run.lifecycle.in_progress()
    chosen: tuple[TryPlan, str] | None = None
    if in_progress is not None and in_progress.plan.attempt == ti.try_number:
        chosen = in_progress.plan, f"try {ti.try_number}: resuming gang {in_progress.plan.gang}"
    elif in_progress is not None:
        chosen = _adopt_or_record(run, in_progress, start_deadline, now)
    records = run.lifecycle.finished()
    if chosen is None:
        chosen = _new_plan(run, records, start_deadline, now)
    try_plan, explanation = chosen
    run.log.info("Gang plan: %s", explanation)
    return try_plan, records


def _new_plan(run: TryRun, records: list[TryRecord], start_deadline: float | None, now: float) -> tuple[TryPlan, str]:
    """A new plan (``reservation.tries.plan.plan_try``; for ``reservation="auto"`` in the mode its
    cluster serves). When no try may start: withdraw what earlier tries left, record why, fail the task."""
    settings, ti = run.settings, run.context["ti"]
    assert settings.configured is not None  # checked by choose_plan
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
    return _choose_mode(run, *chosen) if settings.auto_reservation else chosen


def reserve(run: TryRun, state: TryState, records: list[TryRecord]) -> Reserved:
    """Prepare the try's cluster and create (or adopt) its reservation there: precheck, withdraw the
    objects earlier tries left there (and, in a thread meanwhile, on other clusters), place a topology
    gang (the plan stored with its placement), then ``creation.ensure_reservation``."""
    try_plan = state.plan
    spec = try_plan.spec
    places = clusters.places_of(run, [record for record in records if record.gang != try_plan.gang])
    here = clusters.Place(run.conn_id_of(try_plan), spec.namespace, spec.mode)
    earlier = places.get(here, [])
    elsewhere = clusters.withdraw_elsewhere(run, places, here)
    try:
        placed, note, dispatching = run.cluster(lambda client: _prepare(run, client, spec, earlier))
        if note is not None:
            try_plan = replace(try_plan, spec=placed)
            run.state = state = run.lifecycle.update(state, plan=try_plan, topology_note=note)
            run.log.info("Gang %s topology: %s", spec.name, topology_line(placed, note))
        created = placed if dispatching is None else multikueue.dispatched_spec(placed)
        facts = run.cluster(
            lambda client: creation.ensure_reservation(
                client, created, owner_try=try_plan.attempt, multikueue=dispatching is not None
            )
        )
    finally:
        if elsewhere is not None:
            elsewhere.join(timeout=clusters.WITHDRAW_TIMEOUT_SECONDS)
    return Reserved(state, placed, created, facts, dispatching, here)


async def _prepare(
    run: TryRun, client: KubeClient, spec: GangSpec, earlier: list[str]
) -> tuple[GangSpec, str | None, str | None]:
    """On the try's cluster: the precheck (its warnings logged), the withdrawal of the ``earlier``
    tries' gangs, and the topology placement: the gang as placed, the topology note (``None``: no
    topology) and the MultiKueue admission check its queue dispatches through (``None``: none)."""
    checked = await precheck.precheck(client, spec)
    for warning in checked.warnings:
        run.log.warning("Gang %s precheck: %s", spec.name, warning)
    withdrawn = await deletion.withdraw(client, spec.namespace, earlier, spec.mode)
    if withdrawn:
        run.log.info("Withdrew %d objects left by earlier tries %s", withdrawn, earlier)
    placed, note = await topology_reads.placed(client, spec)
    return placed, note, checked.multikueue_check


def record_reservation(run: TryRun, reserved: Reserved) -> Reserved:
    """Log the reservation and store it in the try's state (the plan of the gang as created, the
    owner's and the Job's uids, the objects, the MultiKueue dispatch); the reservation as stored."""
    state, spec, dispatching = reserved.state, reserved.spec, reserved.dispatching
    if dispatching is not None:
        run.log.info(
            "Gang %s: LocalQueue %s dispatches through MultiKueue (admission check %r): the Job runs on the worker "
            "cluster that admits it",
            spec.name,
            spec.queue,
            dispatching,
        )
    if reserved.created != spec:
        run.log.info("Gang %s: %s", spec.name, multikueue.full_size_note(spec))
        spec = reserved.created
        run.state = state = run.lifecycle.update(state, plan=replace(state.plan, spec=spec))
    facts = reserved.facts
    run.log.info(
        "Reservation %s (%s, %d members, step: %s, cluster %s): %d objects created, the rest adopted",
        state.plan.gang,
        spec.mode.value,
        spec.size,
        state.plan.step,
        reserved.here.conn_id,
        facts.created,
    )
    run.state = state = run.lifecycle.update(
        state,
        owner_uid=facts.owner_uid,
        job_uid=facts.job_uid,
        objects=facts.objects,
        multikueue=None if dispatching is None else MultiKueueDispatch(admission_check=dispatching),
    )
    return replace(reserved, state=state, spec=spec)


def push_reservation_xcom(run: TryRun, reserved: Reserved) -> None:
    """The reservation XCom (``links.RESERVATION_XCOM_KEY``) the extra link and the Gang page show."""
    try_plan, spec = reserved.plan, reserved.spec
    run.context["ti"].xcom_push(
        key=RESERVATION_XCOM_KEY,
        value={
            "gang": try_plan.gang,
            "namespace": spec.namespace,
            "mode": spec.mode.value,
            "size": spec.size,
            "step": try_plan.step,
            "try": try_plan.attempt,
            "kubernetes_conn_id": reserved.here.conn_id,
            "zone": spec.zone,
            "queue": spec.queue,
            "provisioning_class": spec.provisioning_class,
        },
    )


def wait_for_reservation(run: TryRun, reserved: Reserved) -> Any:
    """Wait (``ReservationTrigger``, deferred or inline) until the reservation is granted or the try's
    reservation deadline passes; then :func:`.launching.reserved`."""
    try_plan, spec, job_uid = reserved.plan, reserved.spec, reserved.facts.job_uid
    watch = inspection.watch_targets(spec, job_uid)
    arguments = run.trigger_arguments(
        try_plan,
        job_uid=job_uid,
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

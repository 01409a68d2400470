"""The stages after the reservation wait: launch the members together, then end the try on the run's event.

::

    reserved ── failed or killed? end
             ── re-check the reservation (a booking may have expired while the task resumed)
             ── topology: place the ranks over the pinned domains (room read again: a domain no longer
                holding the gang ends the try, topology_domain_full), or read where they went
             ── publish the world size (Kueue partial admission) and the ranks' domains (topology)
             ── launch all members at once (or release the gates) ── wait: GangRunTrigger ──► finished
             (dispatched by a Kueue MultiKueue manager: follow the worker that admitted it instead,
             operators.dispatched)
    finished ── TryRun.end: logs, accounting, teardown, record
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from airflow_provider_gang.hooks import creation, inspection, topology_reads
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.operators import dispatched
from airflow_provider_gang.operators.settings import UNLIMITED_RUN
from airflow_provider_gang.operators.try_run import TryRun
from airflow_provider_gang.reservation import clock
from airflow_provider_gang.reservation.decision import Decision
from airflow_provider_gang.reservation.errors import PlacementRefused
from airflow_provider_gang.reservation.phases import Phase
from airflow_provider_gang.reservation.records.events import GangEvent
from airflow_provider_gang.reservation.tries import results
from airflow_provider_gang.reservation.tries.results import TryEnding
from airflow_provider_gang.triggers.gang_run import GangRunTrigger


def reserved(run: TryRun, event: GangEvent) -> Any:
    """The reservation wait ended with ``event``: launch the members, or end the try with its reason."""
    state = run.resume()
    spec = state.plan.spec
    run.state = state = run.lifecycle.update(state, reservation_event=replace(event, members=()))
    if not event.succeeded or run.waiter.killed:
        return run.end(event, None)
    size = event.admitted_count or spec.size
    now = clock.current().now()
    owner_uid = str(state.owner_uid)

    async def launch(client: KubeClient) -> Decision | None:
        recheck = await inspection.recheck_reservation(client, spec, started_at=state.plan.requested_at, now=now)
        if recheck is not None and recheck.phase is not Phase.RESERVED:
            return recheck
        try:
            places = await topology_reads.places_at_launch(client, spec, job_uid=state.job_uid)
        except PlacementRefused as refused:
            return Decision(phase=Phase.FAILED, terminal=True, reason=refused.reason, message=refused.message)
        told = await creation.publish_world(client, spec, size=size, owner_uid=owner_uid, domains=places.domains)
        if told is not None:
            run.log.info("Gang %s: %s", spec.name, told)
        if places.domains:
            where = results.describe_rank_domains({str(rank): domain for rank, domain in places.domains.items()})
            run.log.info("Gang %s: ranks by %s: %s", spec.name, spec.topology_label, where)
        launched = await creation.launch(client, spec, size=size, owner_uid=owner_uid, hosts=places.hosts)
        run.log.info("Gang %s: launched %d members together (%s)", spec.name, size, launched)
        return None

    stage: dict[str, Any] = {"pod_selector": inspection.watch_targets(spec, state.job_uid).member_selector}
    if state.multikueue is not None:
        followed = dispatched.follow_worker(run, state, state.multikueue)
        if isinstance(followed, TryEnding):
            run.log.warning("Gang %s: the reservation ended before launch: %s", spec.name, followed.message)
            return run.end(event, None, followed)
        state, stage = followed
    else:
        lost = run.cluster(launch)
        if lost is not None:
            run.log.warning("Gang %s: the reservation ended before launch: %s", spec.name, lost.message)
            return run.end(event, None, TryEnding.failed(lost.reason, lost.message))
    run_limit = run.settings.run_timeout or UNLIMITED_RUN
    deadline = now + (run.settings.startup_timeout + run_limit).total_seconds()
    run.state = state = run.lifecycle.update(state, launched_at=now, size_run=size)
    arguments = run.trigger_arguments(
        state.plan,
        job_uid=state.job_uid,
        size=size,
        started_at=now,
        deadline=deadline,
        startup_deadline=now + run.settings.startup_timeout.total_seconds(),
        read_checkpoints=spec.checkpoint is not None,
        log_ranks=tuple(results.ranks_to_log(run.settings.log_ranks, size)),
        **stage,
    )
    run_event = run.waiter.wait(GangRunTrigger.of(arguments), deadline=deadline, spec=spec)
    return finished(run, run_event)


def finished(run: TryRun, event: GangEvent) -> Any:
    """The run wait ended with ``event``: end the try (logs, accounting, clean-up; the summary on success)."""
    state = run.resume()
    return run.end(state.reservation_event, event)

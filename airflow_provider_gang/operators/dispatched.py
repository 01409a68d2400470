"""The launch of a gang a Kueue MultiKueue manager dispatched to a worker cluster (``reservation.multikueue``).

::

    reserved ── the worker that admitted it (the manager Workload's status.clusterName)
             ── its connection (multikueue_connections)?
                  yes: on the worker, the connection's permissions (hooks.precheck.WORKER_NEEDS),
                       Kueue's copy of the Job and the rendezvous Service owned by it;
                       the run wait watches the members and the Workload there, and the manager's
                       Job (MultiKueue removes the worker's copies as soon as the gang ended, maybe
                       before the watch there saw the end)
                  no:  said in the log; the run wait watches the manager's Job, whose status
                       MultiKueue mirrors from the worker's

Kueue itself starts the members on the worker (its copy of the Job, unsuspended by the worker's
Kueue); nothing is launched here. The worker and its connection are stored in the try's state
(``TryState.multikueue``) before the run wait, so ``on_kill``, the teardown and the record reach it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from airflow_provider_gang.hooks import inspection, precheck
from airflow_provider_gang.hooks import multikueue as multikueue_hooks
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.operators.try_run import TryRun
from airflow_provider_gang.reservation import multikueue, naming
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import MultiKueueDispatch, TryState
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError
from airflow_provider_gang.reservation.tries.results import TryEnding


def follow_worker(
    run: TryRun, state: TryState, dispatch: MultiKueueDispatch
) -> tuple[TryState, dict[str, Any]] | TryEnding:
    """Learn and prepare the worker of the granted ``state`` (see the module docstring): the state
    as stored now and the run wait's own trigger arguments, or how the try ends (the reservation
    gone since it was granted)."""
    spec = state.plan.spec
    manager_job_uid = str(state.job_uid)
    worker = run.cluster(lambda client: multikueue_hooks.admitted_worker(client, spec, manager_job_uid))
    if worker is None:
        return TryEnding.failed(
            Reason.RESERVATION_GONE,
            "the Workload was admitted but names no worker cluster any more (MultiKueue evicted it since)",
        )
    conn_id = multikueue.connection_for(worker, run.settings.multikueue_connections)
    dispatch = replace(dispatch, worker=worker, worker_conn_id=conn_id)
    run.state = state = run.lifecycle.update(state, multikueue=dispatch)
    if conn_id is None:
        return state, _through_the_manager(run, spec, worker, manager_job_uid)
    return _on_the_worker(run, state, dispatch, worker, conn_id)


def _through_the_manager(run: TryRun, spec: GangSpec, worker: str, manager_job_uid: str) -> dict[str, Any]:
    """A worker without a connection: say what cannot be seen there; the run wait's arguments that
    follow the manager's Job (whose status MultiKueue mirrors from the worker's) and Workload."""
    run.log.warning("Gang %s: %s", spec.name, multikueue.not_seen_note(worker))
    if spec.distributed is not None:
        run.log.warning(
            "Gang %s: no rendezvous Service can be made on %r either; its members find rank 0 only if "
            "the worker has a headless Service %s",
            spec.name,
            worker,
            naming.GangNames(spec.name).service,
        )
    watch = inspection.watch_targets(spec, manager_job_uid)
    return {"job_name": naming.GangNames(spec.name).job, "workload_selector": watch.workload_selector}


def _on_the_worker(
    run: TryRun, state: TryState, dispatch: MultiKueueDispatch, worker: str, conn_id: str
) -> tuple[TryState, dict[str, Any]] | TryEnding:
    """A worker with a connection: check it and prepare the gang there (Kueue's copy of the Job, the
    rendezvous Service), store the copy's uid; the run wait's arguments that follow the members and
    the Workload on the worker, or how the try ends when the copy is gone."""
    spec = state.plan.spec

    async def prepare(client: KubeClient) -> str | None:
        refusal = await precheck.worker_refusal(client, spec, worker)
        if refusal is not None:
            raise precheck.PrecheckFailed(refusal)
        return await multikueue_hooks.prepare_worker(client, spec)

    worker_job_uid = run.cluster(prepare, conn_id=_usable(run, worker, conn_id))
    if worker_job_uid is None:
        return TryEnding.failed(
            Reason.RESERVATION_GONE, f"Kueue's copy of the Job is not on worker cluster {worker!r} (removed since)"
        )
    run.state = state = run.lifecycle.update(state, multikueue=replace(dispatch, worker_job_uid=worker_job_uid))
    run.track(state)
    run.log.info(
        "Gang %s: admitted by MultiKueue worker cluster %r; following its members there through connection %r",
        spec.name,
        worker,
        conn_id,
    )
    watch = inspection.watch_targets(spec, worker_job_uid)
    return state, {
        "pod_selector": watch.member_selector,
        "workload_selector": watch.workload_selector,
        "members_kubernetes_conn_id": conn_id,
        "job_name": naming.GangNames(spec.name).job,
    }


def _usable(run: TryRun, worker: str, conn_id: str) -> str:
    """``conn_id`` once Airflow resolved it; a connection that cannot be used raises
    :class:`GangArgumentError` naming the worker and the mapping (only a worker can check that)."""
    try:
        run.connection(conn_id)
    except Exception as error:
        raise GangArgumentError(
            "multikueue_connections",
            f"maps MultiKueue worker cluster {worker!r} to connection {conn_id!r}, which cannot be used: "
            f"{type(error).__name__}: {error}",
            f"add an Airflow connection {conn_id!r} of type kubernetes for {worker!r}, or change the mapping",
        ) from error
    return conn_id

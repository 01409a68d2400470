"""Run-stage rules of :func:`reservation.decision.decide` (see its module docstring)."""

from __future__ import annotations

from airflow_provider_gang.reservation import job_status, members, pod_group, provisioning, reserving, workload
from airflow_provider_gang.reservation.members import GangState, MemberState
from airflow_provider_gang.reservation.observed import Observed
from airflow_provider_gang.reservation.outcome import Decision
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.provisioning import ProvisioningState
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.reservation.workload import WorkloadState

_RESERVATION_ENDS_RUN = {
    WorkloadState.PREEMPTED,
    WorkloadState.EVICTED,
    WorkloadState.INACTIVE,
}


def _reservation_failure(observed: Observed) -> Decision | None:
    """A reservation object that ends the run whatever the pods say, or ``None``."""
    if observed.mode is ReservationMode.KUEUE:
        if observed.workload is not None and workload.classify_workload(observed.workload) in _RESERVATION_ENDS_RUN:
            return reserving.from_workload(observed.workload, observed.size)
        return None
    if observed.mode is ReservationMode.WORKLOAD:
        return pod_group.run_failure(observed.pod_group, size=observed.size)
    request = observed.provisioning_request
    revoked = provisioning.classify_provisioning_request(request) is ProvisioningState.CAPACITY_REVOKED
    if request is not None and revoked:
        return reserving.from_provisioning_request(request, observed.size)
    return None


def _spot_preemption(observed: Observed, gang: members.GangRun) -> Decision | None:
    """A member's spot node was reclaimed (now or in an earlier view), or ``None``. It outranks every
    other failure: the peers that fail or vanish afterwards fail because of it. While a member on a
    node being shut down (its own status, or ``Observed.nodes_shutting_down``) still runs (the
    shutdown's grace period) the wait goes on, so the termination
    message it writes last (its checkpoint, ``reservation.checkpoint``) is read before the pods go."""
    now, stopping = members.spot_preemption(
        observed.pods, size=observed.size, nodes_shutting_down=observed.nodes_shutting_down
    )
    ranks = sorted(now | observed.spot_preempted_ranks)
    if not ranks and not stopping:
        return None
    if stopping:
        return Decision(
            Phase.RUNNING,
            False,
            Reason.MEMBERS_RUNNING,
            f"the spot node of rank(s) {list(stopping)} is shutting down; waiting for their containers to stop",
            members=gang.members,
        )
    lost = "; ".join(member.describe() for member in gang.members if member.rank in ranks)
    return Decision(
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
        f"{len(ranks)} of {observed.size} lost to spot preemption: {lost}",
        members=gang.members,
    )


def _ended_by_its_job(observed: Observed, gang: members.GangRun) -> Decision | None:
    """The end a Kueue MultiKueue manager's mirror of the worker's Job reports while the pods seen on
    the worker have not ended (MultiKueue deletes them once it learns the gang finished, maybe before
    the watch saw them end), or ``None``; the members as last seen are kept."""
    if observed.job is None or gang.state not in (GangState.STARTING, GangState.RUNNING):
        return None
    by_job = job_status.decide_by_job(observed.job, size=observed.size)
    if by_job.phase not in (Phase.SUCCEEDED, Phase.FAILED):
        return None
    return Decision(by_job.phase, True, by_job.reason, by_job.message, members=gang.members)


def decide_run(observed: Observed) -> Decision:
    """The run-stage decision for ``observed``; by its Job's status alone when no pod can be read
    (``Observed.job_status_only``, :func:`.job_status.decide_by_job`)."""
    if observed.job_status_only:
        ended = _reservation_failure(observed)
        return ended if ended is not None else job_status.decide_by_job(observed.job, size=observed.size)
    gang = members.classify_running_gang(observed.pods, size=observed.size, missing_is_lost=not observed.pods_from_job)
    preempted = _spot_preemption(observed, gang)
    if preempted is not None:
        return preempted
    ended = _reservation_failure(observed)
    if ended is not None:
        return Decision(ended.phase, True, ended.reason, ended.message, members=gang.members)
    mirrored = _ended_by_its_job(observed, gang)
    if mirrored is not None:
        return mirrored
    total = observed.size
    if gang.state is GangState.MEMBER_FAILED:
        failed = gang.in_state(MemberState.FAILED)
        text = "; ".join(member.describe() for member in failed)
        return Decision(
            Phase.FAILED, True, Reason.MEMBER_FAILED, f"{len(failed)} of {total} failed: {text}", members=gang.members
        )
    if gang.state is GangState.MEMBER_LOST:
        lost = gang.in_state(MemberState.LOST, MemberState.MISSING)
        text = "; ".join(member.describe() for member in lost)
        return Decision(
            Phase.FAILED, True, Reason.MEMBER_LOST, f"{len(lost)} of {total} lost: {text}", members=gang.members
        )
    if gang.state is GangState.SUCCEEDED:
        return Decision(
            Phase.SUCCEEDED, True, Reason.ALL_SUCCEEDED, f"all {total} members succeeded", members=gang.members
        )
    running = len(gang.in_state(MemberState.RUNNING, MemberState.SUCCEEDED))
    if gang.state is GangState.RUNNING:
        message = f"all {total} members running or done"
        return Decision(Phase.RUNNING, False, Reason.MEMBERS_RUNNING, message, members=gang.members)
    waiting = [member.rank for member in gang.in_state(MemberState.PENDING, MemberState.MISSING)]
    return Decision(
        Phase.STARTING,
        False,
        Reason.MEMBERS_STARTING,
        f"{running} of {total} members running; waiting for rank(s) {waiting}",
        members=gang.members,
    )

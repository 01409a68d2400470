"""Phases of a gang and the enum reasons that explain them.

Both enums are a **stored format**: their string values travel in trigger events, are written into
XCom summaries and the fallback history, and are read back by already-deferred tasks after an
upgrade. Add members freely; never rename or remove one (astronomer-cosmos ``WatcherEventReason``
follows the same rule).

Phase, in the order a healthy gang passes through them::

    PENDING -> RESERVED -> STARTING -> RUNNING -> SUCCEEDED
       \\___________\\___________\\__________\\____-> FAILED

Reason says *why* a decision was taken. :func:`is_retryable` groups the failure reasons into those
a new try (possibly further down the fallback ladder) can fix and those it cannot.
"""

from __future__ import annotations

from enum import Enum


class Phase(str, Enum):
    """Where the gang is in its life."""

    PENDING = "pending"
    """Reservation requested, not (yet) granted."""
    RESERVED = "reserved"
    """Capacity (or quota) granted for the whole gang; members may be launched."""
    STARTING = "starting"
    """Members launched, not all of them running yet."""
    RUNNING = "running"
    """Every member is running."""
    SUCCEEDED = "succeeded"
    """Every member exited with code 0."""
    FAILED = "failed"
    """The try is over without success; :class:`Reason` tells why."""


class Reason(str, Enum):
    """Why a decision was taken (stored format: values never change)."""

    # Waiting: not terminal.
    NOT_HANDLED_YET = "not_handled_yet"
    """The reservation object exists but no controller has written a condition yet."""
    WAITING_FOR_CAPACITY = "waiting_for_capacity"
    """ProvisioningRequest accepted or retried (``Provisioned=False``); capacity not found yet."""
    WAITING_FOR_QUOTA = "waiting_for_quota"
    """Kueue has not reserved quota for the Workload yet."""
    WAITING_FOR_ADMISSION_CHECKS = "waiting_for_admission_checks"
    """Quota is reserved; Kueue waits for admission checks (e.g. its own ProvisioningRequest)."""
    WAITING_FOR_OBJECTS = "waiting_for_objects"
    """An object of the reservation (Workload, gated member pods) is not visible yet."""
    MEMBERS_STARTING = "members_starting"
    """Members launched, some not running yet."""
    MEMBERS_RUNNING = "members_running"
    """Every member is running."""

    # Success.
    RESERVED = "reserved"
    """The whole gang (or at least its floor, for partial admission) is reserved."""
    ALL_SUCCEEDED = "all_succeeded"
    """Every member exited with code 0."""

    # Failures a new try can fix.
    CAPACITY_NOT_FOUND = "capacity_not_found"
    """``Failed=True`` with reason ``CapacityIsNotFound`` (check-capacity with ``noRetry``)."""
    PROVISIONING_FAILED = "provisioning_failed"
    """``Failed=True`` with any other reason (``Expired``, ``FailedToCreatePods``, ``OutOfResources``, ...)."""
    BOOKING_EXPIRED = "booking_expired"
    """The 10-minute booking ran out before the members were bound."""
    CAPACITY_REVOKED = "capacity_revoked"
    """``CapacityRevoked=True``: the provisioned nodes are gone (GKE only)."""
    KUEUE_REJECTED = "kueue_rejected"
    """An admission check is ``Rejected``: Kueue deactivates the Workload."""
    KUEUE_RETRY = "kueue_retry"
    """An admission check is ``Retry``: Kueue evicts and requeues; we start a fresh try instead."""
    WORKLOAD_DEACTIVATED = "workload_deactivated"
    """``spec.active=false`` (requeue limit, rejected check, or a user)."""
    EVICTED = "evicted"
    """Kueue evicted the Workload (``Evicted=True``) for a reason other than preemption."""
    PREEMPTED = "preempted"
    """Kueue preempted the Workload for a higher-priority one (``Preempted=True`` or eviction reason)."""
    WORKLOAD_FINISHED = "workload_finished"
    """The Workload reports ``Finished=True`` while we still wait for admission."""
    RESERVATION_GONE = "reservation_gone"
    """The reservation object was deleted under us."""
    DEADLINE = "deadline"
    """Our own per-try deadline passed (upstream may wait in ``Accepted`` forever)."""
    MEMBER_FAILED = "member_failed"
    """A member exited non-zero (or was OOM-killed, or failed to start)."""
    MEMBER_LOST = "member_lost"
    """A member disappeared: deleted, evicted, or its node was lost."""
    SPOT_PREEMPTED = "spot_preempted"
    """A member's spot node was reclaimed: the pod asked for spot capacity (``cloud.google.com/gke-spot``)
    and the kubelet's graceful node shutdown ended it (``DisruptionTarget`` reason
    ``TerminationByKubelet``, or phase ``Failed`` with reason ``Terminated``;
    https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms#termination-graceful-shutdown).
    Its own reason, not ``member_lost`` nor Kueue's ``preempted``: it says "the capacity type was
    taken back", which a ladder answers by staying on spot a few times, then ``OnDemand``."""
    MEMBER_EXIT_RETRYABLE = "member_exit_retryable"
    """A member exited with a code listed in the operator's ``retry_on_exit_codes`` (the program
    says "infrastructure": a NCCL timeout, a lost device), and none with a ``fail_on_exit_codes``
    code (``reservation.exit_codes``)."""
    CLUSTER_UNREACHABLE = "cluster_unreachable"
    """The API server did not answer (transport errors, 429/5xx) past the client's retries."""
    MALFORMED_ANSWER = "malformed_answer"
    """The API server sent an object with a field of the wrong type (``reservation.shape``); a new
    try makes new objects."""
    NO_TOPOLOGY_DOMAIN = "no_topology_domain"
    """A gang with a required topology found no node it may run on that carries the topology label:
    no domain to pin it to, nor to grow (``reservation.topology.choice``). A new try may find one (a
    node pool scaled up), or loosen the topology (``LoosenTopology``)."""
    TOPOLOGY_DOMAIN_FULL = "topology_domain_full"
    """The domain a gang was pinned to no longer held it when its members were to be released or
    created: pods of other schedulers took the room between the choice and the bind. Nothing of the
    gang was bound (``reservation.topology.ranks``)."""
    UNEXPECTED_ERROR = "unexpected_error"
    """The try raised an error of no known kind (a bug or the worker's environment); Airflow retries
    plain exceptions, and so does the ladder's ``RetryAsIs``."""

    # Failures a new try cannot fix.
    INVALID = "invalid"
    """The spec or the objects are invalid; fix the DAG."""
    START_WINDOW_MISSED = "start_window_missed"
    """The run's ``start_by`` moment passed before the gang started."""
    LADDER_EXHAUSTED = "ladder_exhausted"
    """Every fallback step was tried."""
    MEMBER_EXIT_FAILS_FOR_GOOD = "member_exit_fails_for_good"
    """A member exited with a code listed in the operator's ``fail_on_exit_codes`` (the program
    says "my own bug or bad input"): no retry can help (``reservation.exit_codes``)."""

    # Neither: the try was stopped from outside.
    KILLED = "killed"
    """The task was killed (marked failed or success by a user, SIGTERM, ``execution_timeout``) or its
    gang was deleted from outside while it waited. Not a failure of the gang: it is no input to the
    fallback ladder (:func:`is_ladder_input`)."""
    WORKER_LOST = "worker_lost"
    """The worker running the try stopped before the try finished (killed, out of memory, node lost)
    and the next try adopted its intact gang. No input to the ladder either."""


TERMINAL_PHASES = frozenset({Phase.SUCCEEDED, Phase.FAILED})

_RETRYABLE = frozenset(
    {
        Reason.CAPACITY_NOT_FOUND,
        Reason.PROVISIONING_FAILED,
        Reason.BOOKING_EXPIRED,
        Reason.CAPACITY_REVOKED,
        Reason.KUEUE_REJECTED,
        Reason.KUEUE_RETRY,
        Reason.WORKLOAD_DEACTIVATED,
        Reason.EVICTED,
        Reason.PREEMPTED,
        Reason.WORKLOAD_FINISHED,
        Reason.RESERVATION_GONE,
        Reason.DEADLINE,
        Reason.MEMBER_FAILED,
        Reason.MEMBER_LOST,
        Reason.SPOT_PREEMPTED,
        Reason.MEMBER_EXIT_RETRYABLE,
        Reason.CLUSTER_UNREACHABLE,
        Reason.MALFORMED_ANSWER,
        Reason.NO_TOPOLOGY_DOMAIN,
        Reason.TOPOLOGY_DOMAIN_FULL,
        Reason.UNEXPECTED_ERROR,
    }
)


def is_retryable(reason: Reason) -> bool:
    """Whether a new try can plausibly succeed after a try failed for ``reason``.

    Waiting and success reasons are not failures and return ``False``.
    """
    return reason in _RETRYABLE


def is_ladder_input(reason: Reason) -> bool:
    """Whether a try that ended with ``reason`` counts for the fallback ladder: every reason but
    ``killed`` and ``worker_lost``, which say nothing about the gang's chances on the cluster."""
    return reason not in (Reason.KILLED, Reason.WORKER_LOST)

"""Where the gang's member pods stand: :func:`classify_gated_pods` (before launch, gates mode) and
:func:`classify_running_gang` (after launch).

A member is identified by its rank: our label ``airflow-gang.io/rank``, else the Job controller's
``batch.kubernetes.io/job-completion-index`` label or annotation (Kueue Job mode, Indexed Job).
Pods without a rank, or with a rank outside ``0..size-1``, are not members and are ignored.

Member state, by pod (first match wins)::

    phase Succeeded                                   -> SUCCEEDED
    being deleted, DisruptionTarget=True, phase
      Unknown, or Failed with a reason in
      LOST_POD_REASONS (Evicted, NodeLost, ...)       -> LOST      (killed from outside the program)
    phase Failed, or a container terminated non-zero,
      or waiting with an unrecoverable reason
      (FATAL_WAITING_REASONS)                         -> FAILED    (exit code and reason recorded)
    phase Running                                     -> RUNNING
    otherwise                                         -> PENDING

When a rank has several pods (a Job replaced one), the worst state wins: FAILED > LOST > PENDING >
RUNNING > SUCCEEDED. Gang state, first match wins: any FAILED -> MEMBER_FAILED; any LOST (or a
missing rank, when ``missing_is_lost``) -> MEMBER_LOST; all SUCCEEDED -> SUCCEEDED; all RUNNING or
SUCCEEDED -> RUNNING; otherwise STARTING.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_provider_gang.reservation import conditions, naming, timestamps
from airflow_provider_gang.reservation.conditions import Object

RANK_LABEL = naming.RANK_LABEL
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
LOST_POD_REASONS = frozenset(
    {"Evicted", "NodeLost", "Shutdown", "Terminated", "NodeAffinity", "UnexpectedAdmissionError"}
)
SPOT_MEMBER_LABEL = naming.SPOT_LABEL
"""Set to ``"true"`` on every member placed on spot capacity (``manifests.pods.member_template``),
whatever the cloud profile's own spot label is."""
GKE_SPOT_LABEL = "cloud.google.com/gke-spot"
"""The node selector spot members of earlier releases (GKE only) carry instead."""
NODE_SHUTDOWN_DISRUPTION = "TerminationByKubelet"
"""``DisruptionTarget`` reason the kubelet's graceful node shutdown sets (``pkg/kubelet/nodeshutdown``)."""
NODE_SHUTDOWN_REASON = "Terminated"
"""Pod ``status.reason`` the kubelet's graceful node shutdown sets when it fails the pod."""
FATAL_WAITING_REASONS = frozenset(
    {"InvalidImageName", "ErrImageNeverPull", "CreateContainerError", "RunContainerError"}
)
"""Waiting reasons that no retry of the kubelet can fix. Not ``CreateContainerConfigError``: the
kubelet retries it (a ConfigMap or Secret an env entry needs may appear later, ``kubelet_pods.go``
``makeEnvironmentVariables``), and Kueue partially admitted members wait in it on purpose until the
operator writes their world ConfigMap (``manifests.world``); such a member is PENDING, and a gang
that never gets past it ends at ``startup_timeout``."""


class MemberState(str, Enum):
    MISSING = "missing"
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    LOST = "lost"
    FAILED = "failed"


_SEVERITY = [
    MemberState.SUCCEEDED,
    MemberState.RUNNING,
    MemberState.MISSING,
    MemberState.PENDING,
    MemberState.LOST,
    MemberState.FAILED,
]


@dataclass(frozen=True)
class MemberStatus:
    """One member as observed. ``exit_code``/``reason`` explain FAILED and LOST (``OOMKilled``,
    ``Error``, ``Evicted``, ``Deleted``...); times are epoch seconds or ``None`` when unknown."""

    rank: int
    state: MemberState
    pod_name: str = ""
    node: str = ""
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    started_at: float | None = None
    finished_at: float | None = None

    def describe(self) -> str:
        parts = [f"rank {self.rank} ({self.pod_name or 'no pod'}) {self.state.value}"]
        if self.exit_code is not None:
            parts.append(f"exit code {self.exit_code}")
        if self.reason:
            parts.append(self.reason)
        if self.message:
            parts.append(self.message)
        return ", ".join(parts)


def member_rank(pod: Object) -> int | None:
    """The rank of ``pod`` (see module docstring), or ``None``."""
    metadata = pod.get("metadata") or {}
    for source in (metadata.get("labels") or {}, metadata.get("annotations") or {}):
        for key in (RANK_LABEL, JOB_COMPLETION_INDEX):
            value = source.get(key)
            if isinstance(value, str) and value.isdigit():
                return int(value)
    return None


def _container_statuses(pod: Object) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]


def _failed_container(pod: Object) -> Mapping[str, Any] | None:
    for container in _container_statuses(pod):
        terminated = (container.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            return dict(terminated)
    return None


def _fatal_waiting(pod: Object) -> Mapping[str, Any] | None:
    for container in _container_statuses(pod):
        waiting = (container.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") in FATAL_WAITING_REASONS:
            return dict(waiting)
    return None


def _finished_at(pod: Object) -> float | None:
    finished = [
        timestamps.parse_time(((container.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for container in _container_statuses(pod)
    ]
    known = [moment for moment in finished if moment is not None]
    return max(known) if known else None


def member_status(pod: Object, rank: int) -> MemberStatus:
    """The :class:`MemberStatus` of one pod by the rules in the module docstring."""
    phase = conditions.pod_phase(pod)
    status = pod.get("status") or {}
    common: dict[str, Any] = {
        "rank": rank,
        "pod_name": str((pod.get("metadata") or {}).get("name") or ""),
        "node": str((pod.get("spec") or {}).get("nodeName") or ""),
        "started_at": timestamps.parse_time(status.get("startTime")),
        "finished_at": _finished_at(pod),
    }
    if phase == "Succeeded":
        return MemberStatus(state=MemberState.SUCCEEDED, exit_code=0, **common)
    lost_reason = _lost_reason(pod, phase)
    if lost_reason:
        message = str(status.get("message") or "")
        return MemberStatus(state=MemberState.LOST, reason=lost_reason, message=message, **common)
    failed = _failed_container(pod) or _fatal_waiting(pod)
    if failed is not None or phase == "Failed":
        failed = failed or {}
        exit_code = failed.get("exitCode")
        return MemberStatus(
            state=MemberState.FAILED,
            exit_code=None if exit_code is None else int(exit_code),
            reason=str(failed.get("reason") or status.get("reason") or "Failed"),
            message=str(failed.get("message") or status.get("message") or ""),
            **common,
        )
    state = MemberState.RUNNING if phase == "Running" else MemberState.PENDING
    return MemberStatus(state=state, **common)


def _lost_reason(pod: Object, phase: str) -> str:
    if conditions.is_terminating(pod):
        return "Deleted"
    if conditions.is_disrupted(pod):
        return str((conditions.find_condition(pod, "DisruptionTarget") or {}).get("reason") or "DisruptionTarget")
    if phase == "Unknown":
        return "NodeLost"
    reason = str((pod.get("status") or {}).get("reason") or "")
    if phase == "Failed" and reason in LOST_POD_REASONS:
        return reason
    return ""


def members_by_rank(pods: Iterable[Object], *, size: int) -> dict[int, MemberStatus]:
    """The worst status per rank ``0..size-1`` (ranks without a pod are MISSING)."""
    found: dict[int, MemberStatus] = {}
    for pod in pods:
        rank = member_rank(pod)
        if rank is None or rank >= size:
            continue
        candidate = member_status(pod, rank)
        current = found.get(rank)
        if current is None or _SEVERITY.index(candidate.state) > _SEVERITY.index(current.state):
            found[rank] = candidate
    return {rank: found.get(rank, MemberStatus(rank=rank, state=MemberState.MISSING)) for rank in range(size)}


def is_on_spot(pod: Object) -> bool:
    """The pod asked for spot capacity: the label :data:`SPOT_MEMBER_LABEL` ``manifests.pods`` sets
    on spot members (or, from an earlier release, the node selector ``cloud.google.com/gke-spot``)."""
    if ((pod.get("metadata") or {}).get("labels") or {}).get(SPOT_MEMBER_LABEL) == "true":
        return True
    return ((pod.get("spec") or {}).get("nodeSelector") or {}).get(GKE_SPOT_LABEL) == "true"


def is_spot_preempted(pod: Object) -> bool:
    """A spot pod the kubelet's graceful node shutdown ended or is ending: GKE reclaims a spot VM
    with ~30 s notice, taints the node ``cloud.google.com/impending-node-termination`` (other clouds:
    their profile's ``preemption_taints``, :mod:`reservation.cloud`) and the kubelet
    stops its pods: once a pod's containers stopped, one status write makes it ``Failed`` with reason
    ``Terminated`` and ``DisruptionTarget`` (reason ``TerminationByKubelet``); the kubelet's status
    manager holds the condition back while containers may run (``mergePodStatus`` in
    ``pkg/kubelet/status/status_manager.go``)
    (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms#termination-graceful-shutdown).
    A ``DisruptionTarget`` ``TerminationByKubelet`` on a pod not yet terminal counts as well."""
    if not is_on_spot(pod) or conditions.pod_phase(pod) == "Succeeded":
        return False
    disruption = conditions.find_condition(pod, "DisruptionTarget") if conditions.is_disrupted(pod) else None
    shutdown = (disruption or {}).get("reason") == NODE_SHUTDOWN_DISRUPTION
    status = pod.get("status") or {}
    return shutdown or (conditions.pod_phase(pod) == "Failed" and status.get("reason") == NODE_SHUTDOWN_REASON)


def is_stopping(pod: Object) -> bool:
    """Some container of ``pod`` still runs (its grace period, e.g. saving a checkpoint on SIGTERM)."""
    if conditions.pod_phase(pod) in ("Succeeded", "Failed"):
        return False
    return any("running" in (container.get("state") or {}) for container in _container_statuses(pod))


def _node(pod: Object) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def spot_preemption(
    pods: Iterable[Object], *, size: int, nodes_shutting_down: frozenset[str] = frozenset()
) -> tuple[frozenset[int], tuple[int, ...]]:
    """The ranks (``0..size-1``) with a spot-preempted pod, and the ranks whose pod on a node being
    shut down is still stopping (:func:`is_stopping`): the kubelet stops a node's pods one by one, so
    a member on the same node may not show the shutdown yet.

    A pod is spot-preempted when :func:`is_spot_preempted` says so, or when it is a spot pod that did
    not succeed on a node in ``nodes_shutting_down`` (a node the trigger read with GKE's termination
    taint, or found gone) and no container of it runs any more: the kubelet reports the shutdown only
    once the containers stopped, so a peer elsewhere can fail first."""
    members = [(rank, pod) for pod in pods if (rank := member_rank(pod)) is not None and rank < size]

    def preempted_pod(pod: Object) -> bool:
        on_stopped_node = is_on_spot(pod) and _node(pod) in nodes_shutting_down and not is_stopping(pod)
        return is_spot_preempted(pod) or (on_stopped_node and conditions.pod_phase(pod) != "Succeeded")

    preempted = [(rank, pod) for rank, pod in members if preempted_pod(pod)]
    nodes = ({_node(pod) for _, pod in preempted} | nodes_shutting_down) - {""}
    shut_down = [(rank, pod) for rank, pod in members if _node(pod) in nodes]
    stopping = sorted({rank for rank, pod in [*preempted, *shut_down] if is_stopping(pod)})
    return frozenset(rank for rank, _ in preempted), tuple(stopping)


def spot_nodes(pods: Iterable[Object], *, size: int) -> dict[int, str]:
    """The node of every member (by rank) that asked for spot capacity and is bound to one."""
    found = {}
    for pod in pods:
        rank = member_rank(pod)
        if rank is not None and rank < size and is_on_spot(pod) and _node(pod):
            found[rank] = _node(pod)
    return found


def missing_log_note(rank: int, *, node_removed: bool) -> str:
    """What the task log says for a wanted rank whose pod was gone when the logs were read: the pods of
    a node that goes away (a reclaimed spot VM, DWS ``capacity_revoked`` after ``maxRunDurationSeconds``)
    are garbage-collected with it, and their logs with them."""
    cause = "its node was removed" if node_removed else "its pod was removed before its log was read"
    return f"(rank {rank}: log unavailable - {cause})"


class GangState(str, Enum):
    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    MEMBER_FAILED = "member_failed"
    MEMBER_LOST = "member_lost"


@dataclass(frozen=True)
class GangRun:
    """The running gang: its state and every member's status, ordered by rank."""

    state: GangState
    members: tuple[MemberStatus, ...]

    def in_state(self, *states: MemberState) -> tuple[MemberStatus, ...]:
        return tuple(member for member in self.members if member.state in states)


def classify_running_gang(pods: Iterable[Object], *, size: int, missing_is_lost: bool = True) -> GangRun:
    """The gang state by the precedence in the module docstring.

    ``missing_is_lost``: whether a rank without any pod means the member was lost (true when we
    created every pod before watching) or is still to be created (Kueue Job mode: the Job
    controller creates pods after admission).
    """
    members = tuple(members_by_rank(pods, size=size).values())
    states = {member.state for member in members}
    if MemberState.FAILED in states:
        state = GangState.MEMBER_FAILED
    elif MemberState.LOST in states or (missing_is_lost and MemberState.MISSING in states):
        state = GangState.MEMBER_LOST
    elif states == {MemberState.SUCCEEDED}:
        state = GangState.SUCCEEDED
    elif states <= {MemberState.RUNNING, MemberState.SUCCEEDED}:
        state = GangState.RUNNING
    else:
        state = GangState.STARTING
    return GangRun(state=state, members=members)


class GateState(str, Enum):
    MISSING_MEMBERS = "missing_members"
    GATED = "gated"
    PARTLY_RELEASED = "partly_released"
    RELEASED = "released"
    BOUND = "bound"


def classify_gated_pods(pods: Iterable[Object], *, size: int, gate: str) -> GateState:
    """Where the gang's gated members stand, first match wins: a rank without a live (not
    terminating) pod -> MISSING_MEMBERS; every member still carries ``gate`` -> GATED; some do ->
    PARTLY_RELEASED; every member bound to a node -> BOUND; otherwise RELEASED."""
    live: dict[int, Object] = {}
    for pod in pods:
        rank = member_rank(pod)
        if rank is not None and rank < size and not conditions.is_terminating(pod):
            live[rank] = pod
    if len(live) < size:
        return GateState.MISSING_MEMBERS
    gated = [conditions.has_gate(pod, gate) for pod in live.values()]
    if all(gated):
        return GateState.GATED
    if any(gated):
        return GateState.PARTLY_RELEASED
    if all(conditions.is_bound(pod) for pod in live.values()):
        return GateState.BOUND
    return GateState.RELEASED

"""The records of a try: its plan, its state while in progress, and its record once finished.

``TryPlan`` is decided once per try (``reservation.tries.plan``), stored inside ``TryState`` under
the task state key ``gang.current`` before any object exists, and read back by every later entry
point of the same try: ``dag.test()`` drops ``defer()`` kwargs (``next_kwargs = {"event": ...}`` in
``DAG.test``, apache/airflow ``task-sdk/src/airflow/sdk/definitions/dag.py``), so nothing else may
carry it. ``TryRecord`` is appended to ``gang.tries`` when the try ends. Both keys survive retries
and worker crashes (Airflow 3.3 ``task_state_store``), which is what adoption, the fallback ladder
and the summed GPU-hours need. ``ReservationFacts`` is what creating the reservation found, from the
cluster actions (``hooks.creation.ensure_reservation``) to the operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from airflow_provider_gang.reservation import ladder_format
from airflow_provider_gang.reservation.fallback import FallbackStep
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.events import GangEvent
from airflow_provider_gang.reservation.records.reading import CURRENT_VERSION, optional_text, record_values
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.unread_reports import UnreadReport


@dataclass(frozen=True)
class TryPlan:
    """What one try does.

    Fields:
        attempt: the Airflow try number; gang: the gang's name (its objects' names derive from it).
        step: the fallback step as the try runs it (``"as configured"``, ``"shrink to 8 members, ran 6"``).
        step_index: its position in ``ladder`` (``None``: as configured).
        spec: the gang as this try creates it, the step applied.
        requested_at: UNIX time the plan was made (the reservation's request time).
        reservation_deadline: UNIX time the reservation wait gives up, with ``deadline_reason``
            (``deadline``, or ``start_window_missed`` when ``start_by`` is earlier).
        start_deadline: UNIX time of ``data_interval_end + start_by`` (``None``: no ``start_by``).
        adopted_from: the try whose gang this try adopted after that try's worker stopped.
        ladder: the sequence's ladder that ``step_index`` points into, kept so that a DAG edited
            between retries cannot change what a stored index means.
        kubernetes_conn_id: the Airflow connection of the cluster the gang is on (the operator's, or
            an ``OtherCluster`` step's); ``None`` in plans stored before it was kept: the operator's.
        repeats: the try repeats the previous try's step after a transient failure
            (``reservation.ladder_choice``), without using it up.
    """

    attempt: int
    gang: str
    step: str
    step_index: int | None
    spec: GangSpec
    requested_at: float
    reservation_deadline: float
    deadline_reason: Reason
    start_deadline: float | None
    adopted_from: int | None = None
    ladder: tuple[FallbackStep, ...] = ()
    kubernetes_conn_id: str | None = None
    repeats: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CURRENT_VERSION,
            "attempt": self.attempt,
            "gang": self.gang,
            "step": self.step,
            "step_index": self.step_index,
            "spec": self.spec.to_dict(),
            "requested_at": self.requested_at,
            "reservation_deadline": self.reservation_deadline,
            "deadline_reason": self.deadline_reason.value,
            "start_deadline": self.start_deadline,
            "adopted_from": self.adopted_from,
            "ladder": ladder_format.ladder_to_plain(self.ladder),
            "kubernetes_conn_id": self.kubernetes_conn_id,
            "repeats": self.repeats,
        }

    @classmethod
    def from_dict(cls, data: Any) -> TryPlan:
        return cls(
            **record_values(
                cls,
                data,
                {
                    "attempt": int,
                    "step_index": int,
                    "spec": GangSpec.from_dict,
                    "requested_at": float,
                    "reservation_deadline": float,
                    "deadline_reason": Reason,
                    "start_deadline": float,
                    "adopted_from": int,
                    "ladder": ladder_format.ladder_from_plain,
                    "kubernetes_conn_id": optional_text,
                    "repeats": bool,
                },
            )
        )


@dataclass(frozen=True)
class ReservedObject:
    """One object a try created or adopted: its resource key (``kube.resources.Resource.key``),
    name and uid - the uid says whether an object found later by that name is still the same one."""

    resource: str
    name: str
    uid: str

    def to_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "name": self.name, "uid": self.uid}

    @classmethod
    def from_dict(cls, data: Any) -> ReservedObject:
        return cls(**record_values(cls, data, {"resource": str, "name": str, "uid": str}))


@dataclass(frozen=True)
class ReservationFacts:
    """What adopting or creating a gang's owner and reservation objects found.

    ``created``: how many objects were created now (the rest were adopted); ``owner_uid``: the
    owner ConfigMap's uid (every other object's owner); ``job_uid``: the Kueue Job's uid (``kueue``
    mode), by which the triggers select its Workload; ``objects``: everything created or adopted.
    """

    created: int
    owner_uid: str
    job_uid: str | None
    objects: tuple[ReservedObject, ...]


@dataclass(frozen=True)
class MultiKueueDispatch:
    """Where a gang queued on a Kueue MultiKueue manager runs (``reservation.multikueue``).

    Fields:
        admission_check: the MultiKueue admission check of the gang's ClusterQueue (on the manager,
            the cluster of the try's plan), found by the precheck.
        worker: the MultiKueueCluster that admitted the gang (the manager Workload's
            ``status.clusterName``); ``None`` until it is admitted.
        worker_conn_id: the Airflow connection mapped to ``worker`` (``multikueue_connections``);
            ``None``: not mapped, the gang is followed through the manager's mirrored Job status.
        worker_job_uid: uid of the Job's copy on the worker (what the rendezvous Service there is
            owned by); ``None`` until read, or without a connection.
    """

    admission_check: str
    worker: str | None = None
    worker_conn_id: str | None = None
    worker_job_uid: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "admission_check": self.admission_check,
            "worker": self.worker,
            "worker_conn_id": self.worker_conn_id,
            "worker_job_uid": self.worker_job_uid,
        }

    @classmethod
    def from_dict(cls, data: Any) -> MultiKueueDispatch:
        return cls(
            **record_values(
                cls,
                data,
                {
                    "admission_check": str,
                    "worker": optional_text,
                    "worker_conn_id": optional_text,
                    "worker_job_uid": optional_text,
                },
            )
        )


@dataclass(frozen=True)
class TryState:
    """The try in progress (task state key ``gang.current``).

    Written by ``operators.lifecycle`` only: first before any object of the try exists, then after
    each stage, and removed when the try is recorded as finished. A worker that dies leaves it
    behind, which is how the next try knows what to adopt or withdraw.

    Fields:
        plan: what the try does.
        owner_uid: uid of the gang's owner ConfigMap once created or adopted (children's owner).
        job_uid: uid of the Kueue Job (``kueue`` mode), whose Workload the triggers select by.
        objects: the reservation objects created or adopted, with their uids.
        reservation_event: the ReservationTrigger's event without ``members`` (once it fired).
        launched_at: UNIX time the members were launched; ``size_run``: how many were.
        teardown_started_at: UNIX time the try began deleting its gang (``operators.try_run``), set
            just before the deletion; a state left with it set is a try whose worker stopped while
            tearing down.
        multikueue: where a gang queued on a MultiKueue manager runs; ``None``: not dispatched.
        topology_note: what the room on the nodes said when the try began, for a gang with a
            topology (``"no rack has room for 4 members (1 nvidia.com/gpu each); the best, rack-b1,
            has room for 2: capacity is asked in rack-b1"``); ``None``: no topology, or not read.
    """

    plan: TryPlan
    owner_uid: str | None = None
    job_uid: str | None = None
    objects: tuple[ReservedObject, ...] = ()
    reservation_event: GangEvent | None = None
    launched_at: float | None = None
    size_run: int | None = None
    teardown_started_at: float | None = None
    multikueue: MultiKueueDispatch | None = None
    topology_note: str | None = None

    def with_changes(self, **changes: Any) -> TryState:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CURRENT_VERSION,
            "plan": self.plan.to_dict(),
            "owner_uid": self.owner_uid,
            "job_uid": self.job_uid,
            "objects": [item.to_dict() for item in self.objects],
            "reservation_event": None if self.reservation_event is None else self.reservation_event.to_dict(),
            "launched_at": self.launched_at,
            "size_run": self.size_run,
            "teardown_started_at": self.teardown_started_at,
            "multikueue": None if self.multikueue is None else self.multikueue.to_dict(),
            "topology_note": self.topology_note,
        }

    @classmethod
    def from_dict(cls, data: Any) -> TryState:
        return cls(
            **record_values(
                cls,
                data,
                {
                    "plan": TryPlan.from_dict,
                    "owner_uid": optional_text,
                    "job_uid": optional_text,
                    "objects": lambda items: tuple(ReservedObject.from_dict(item) for item in items),
                    "reservation_event": GangEvent.from_dict,
                    "launched_at": float,
                    "size_run": int,
                    "teardown_started_at": float,
                    "multikueue": MultiKueueDispatch.from_dict,
                    "topology_note": optional_text,
                },
            )
        )


@dataclass(frozen=True)
class TryRecord:
    """The outcome of one finished try (one item of the task state key ``gang.tries``).

    ``outcome`` is a ``reservation.phases.Reason`` value; ``step`` describes the fallback step the
    try used and ``step_index`` is its position in ``ladder`` (``None``: as configured); seconds are
    ``None`` when the try never reached that stage (``reservation.tries.results``); ``gpu_seconds_*``
    come from ``reservation.cost``; ``exit_codes`` maps rank (as a string: JSON keys) to exit code.
    """

    attempt: int
    gang: str
    step: str
    step_index: int | None
    mode: str
    size: int
    outcome: str
    message: str
    retryable: bool
    queue_seconds: float | None = None
    provisioning_seconds: float | None = None
    run_seconds: float | None = None
    gpu_seconds_reserved: float = 0.0
    gpu_seconds_used: float = 0.0
    gpu_seconds_idle: float = 0.0
    exit_codes: Mapping[str, int] = field(default_factory=dict)
    ladder: tuple[FallbackStep, ...] | None = None
    """The ladder ``step_index`` points into; ``None`` for a try refused before it had a plan."""
    adopted_from: int | None = None
    """The try whose gang this try adopted after that try's worker stopped, if any."""
    checkpoint_step: int | None = None
    """The latest checkpoint step this try's members reported (``reservation.checkpoint``); ``None``:
    none reported, or no ``checkpoint``."""
    checkpoint_progress: int | None = None
    """The last step completed when that report was written (``>= checkpoint_step``)."""
    resumed_from_step: int | None = None
    """The checkpoint step this try resumed from (``GANG_RESUME_STEP``); ``None``: it started afresh."""
    gpu_seconds_lost: float = 0.0
    """GPU-seconds of a failed try with a ``checkpoint`` that a later try redoes (``checkpoint.split_work``)."""
    gpu_seconds_saved: float = 0.0
    """GPU-seconds of a failed try's checkpointed steps, which a resuming try does not redo."""
    exit_code_decision: Mapping[str, Any] | None = None
    """When the exit-code policy decided ``outcome``: ``{"rank", "exit_code", "rule", "reason"}``
    (``reservation.exit_codes.ExitCodeVerdict.to_dict``); ``None`` otherwise."""
    kubernetes_conn_id: str | None = None
    """The Airflow connection of the cluster the try ran on; ``None``: the operator's (a try refused
    before it had a plan, or a record written before clusters were recorded)."""
    namespace: str | None = None
    """The namespace of the try's objects; ``None``: the operator's."""
    repeated: bool = False
    """The try repeated the previous try's step after a transient failure (not a use of the step)."""
    node_reclaimed: bool = False
    """A lost member's node was removed or shut down (``member_lost`` is then about capacity, not transient)."""
    requested_at: float | None = None
    """UNIX time the try's plan was made (``TryPlan.requested_at``): where its timeline lane starts.
    ``None``: a try refused before it had a plan, or a record written before this was kept."""
    start_deadline: float | None = None
    """The plan's ``start_by`` limit (``TryPlan.start_deadline``); ``None``: no ``start_by`` (or not kept)."""
    zone: str | None = None
    """The zone the try's gang was pinned to (its spec after the fallback step); ``None``: any zone."""
    queue: str | None = None
    """The Kueue LocalQueue of the try (``kueue`` mode); ``None``: none."""
    provisioning_class: str | None = None
    """The ProvisioningRequest class of the try (``provisioning_request`` mode); ``None``: none."""
    teardown_started_at: float | None = None
    teardown_ended_at: float | None = None
    """When the try's teardown began and returned (UNIX times, the provider's clock): deleting its
    gang, or only what holds the reservation with ``on_finish="keep"``. ``None``: no teardown ran
    in the try (refused before a gang existed; withdrawn by a later try), or a record written
    before this was kept."""
    unread_reports: tuple[UnreadReport, ...] = ()
    """Members still running when the try ended whose checkpoint report could not be read, and why
    (``reservation.unread_reports``): a checkpoint newer than ``checkpoint_step`` may exist."""
    worker_cluster: str | None = None
    """The Kueue MultiKueue worker cluster (MultiKueueCluster name) the try's gang was admitted on;
    ``None``: not dispatched by MultiKueue (or a record written before this was kept)."""
    worker_kubernetes_conn_id: str | None = None
    """The Airflow connection the try followed that worker through; ``None``: none mapped (or none)."""
    required_topology: str | None = None
    preferred_topology: str | None = None
    """The node label the try's gang was required to fit in one domain of, or preferred to span few
    domains of (its spec after the fallback step); ``None``: no topology."""
    topology_note: str | None = None
    """What the room on the nodes said when the try began (``TryState.topology_note``)."""
    rank_nodes: Mapping[str, str] = field(default_factory=dict)
    """Rank (as a string: JSON keys) -> the node the member ran on, for the ranks that were bound."""
    rank_domains: Mapping[str, str] = field(default_factory=dict)
    """Rank -> the value of the topology label on its node: the domain each rank ran in (a gang with a
    topology; ranks on a node without the label are left out)."""

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["unread_reports"] = [item.to_dict() for item in self.unread_reports]
        values["exit_codes"] = dict(self.exit_codes)
        values["rank_nodes"] = dict(self.rank_nodes)
        values["rank_domains"] = dict(self.rank_domains)
        values["ladder"] = None if self.ladder is None else ladder_format.ladder_to_plain(self.ladder)
        values["exit_code_decision"] = None if self.exit_code_decision is None else dict(self.exit_code_decision)
        return {"version": CURRENT_VERSION, **values}

    @classmethod
    def from_dict(cls, data: Any) -> TryRecord:
        return cls(
            **record_values(
                cls,
                data,
                {
                    "attempt": int,
                    "size": int,
                    "exit_codes": lambda codes: {str(rank): int(code) for rank, code in dict(codes).items()},
                    "ladder": ladder_format.ladder_from_plain,
                    "exit_code_decision": dict,
                    "kubernetes_conn_id": optional_text,
                    "namespace": optional_text,
                    "repeated": bool,
                    "node_reclaimed": bool,
                    "requested_at": float,
                    "start_deadline": float,
                    "zone": optional_text,
                    "queue": optional_text,
                    "provisioning_class": optional_text,
                    "teardown_started_at": float,
                    "teardown_ended_at": float,
                    "unread_reports": lambda items: tuple(UnreadReport.from_dict(item) for item in items),
                    "worker_cluster": optional_text,
                    "worker_kubernetes_conn_id": optional_text,
                    "required_topology": optional_text,
                    "preferred_topology": optional_text,
                    "topology_note": optional_text,
                    "rank_nodes": _rank_map,
                    "rank_domains": _rank_map,
                },
            )
        )


def _rank_map(values: Any) -> dict[str, str]:
    """A stored ``rank -> text`` mapping, keys and values as strings."""
    return {str(rank): str(value) for rank, value in dict(values).items()}

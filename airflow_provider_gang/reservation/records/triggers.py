"""``TriggerArguments``: what a gang trigger is serialized to, and rebuilt from.

Airflow 3.3 stores a deferred task's ``serialize()`` output in the ``trigger`` table and calls
``classpath(**kwargs)`` in whichever triggerer picks it up (``airflow/models/trigger.py``), so the
kwargs are a stored format. Both gang triggers take exactly this record: ``to_dict()`` is their
``serialize()`` kwargs, :meth:`TriggerArguments.from_dict` their constructor's reading.

Fields (plain values):

- ``kubernetes_conn_id``: the Airflow ``kubernetes`` connection, resolved by ``GangHook`` in the
  triggerer (credentials never travel in the kwargs: Airflow 3.3 stores them in clear text).
  ``connection``: ``kube.settings.ConnectionSettings.to_dict()`` output instead, for a cluster given
  by explicit settings (tests, tools); exactly one of the two is set.
- ``members_kubernetes_conn_id``: the connection of the cluster the members run on when it is not
  ``kubernetes_conn_id``'s (a Kueue MultiKueue worker, ``reservation.multikueue``): the run wait
  watches the pods and the Workload there, and ``on_kill`` deletes the ``delete_on_kill`` targets
  there too, after its guarded deletion on ``kubernetes_conn_id``'s cluster (the manager, which holds
  the owner). ``None``: the members are on ``kubernetes_conn_id``'s cluster.
- ``job_name``: follow the members through this Job's status alone (a MultiKueue worker without a
  mapped connection: the manager's Job mirrors the worker's), watched on ``kubernetes_conn_id``'s
  cluster; ``None``: the member pods are watched (``pod_selector``).
- ``gang_name``, ``namespace``: identity of the gang (the names of its objects derive from it).
- ``mode``: the ``ReservationMode``; ``size``: members (requested, or launched after partial
  admission); ``started_at``: UNIX time the wait started (timings, messages).
- ``deadline``: absolute UNIX time at which the wait gives up with ``deadline_reason`` (a ``Reason``:
  ``deadline``, or ``start_window_missed`` when the operator's ``start_by`` is the earlier limit). It
  is absolute so a trigger rebuilt on another triggerer keeps the original budget (as cncf-kubernetes'
  ``KubernetesPodTrigger`` keeps ``_execution_deadline``, ``triggers/pod.py``; apache/airflow#67227).
- ``provisioning_request`` / ``workload_selector`` / ``pod_selector``: the gang's ProvisioningRequest
  name, Kueue Workload label selector, member pods label selector - whichever the wait watches.
- ``scheduling_gate``: the gang's gate name (``gates`` mode, reservation wait).
- ``startup_deadline``: UNIX time by which every member must run (run wait; ``None``: no limit).
- ``pods_from_job``: members are created by a Job controller, so a rank without a pod is still to
  come, not lost; ``None`` means "``kueue`` mode" (Kueue unsuspends an Indexed Job).
- ``read_checkpoints``: container 0's termination message is a checkpoint report (run wait).
- ``log_ranks``: the ranks whose logs the operator copies (``log_ranks`` resolved to ranks); the
  run wait reads their tails before it stops the survivors of a checkpointed gang, and carries
  them in its event (``GangEvent.logs``), since the stopped pods are gone when the operator reads.
- ``preemption_taints``: node taint keys that mean a spot node is being reclaimed (the gang's
  ``CloudProfile.preemption_taints``, ``reservation.cloud``; absent: GKE's).
- ``delete_on_kill``: the gang's objects (:class:`DeleteTarget`), deleted by ``on_kill`` only.
- ``client_options``: ``kube.options.ClientOptions.to_dict()``; ``watch_timeout_seconds``: length
  of each WATCH request.
- ``unreachable_seconds``: how long the API server may fail to answer, consecutively, before the
  wait ends with ``cluster_unreachable``.
- ``try_number``: the Airflow try that deferred (``None``: the trigger's task instance's, read in
  the triggerer); ``triggers.kill`` compares it with the try that owns the gang now.
- ``heartbeat_seconds``, ``tries_allowed``, ``step_description``: what the wait logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.reservation import cloud, deployment
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.reading import CURRENT_VERSION, RecordError, optional_text, record_values
from airflow_provider_gang.reservation.spec import ReservationMode

DEFAULT_HEARTBEAT_SECONDS = float(deployment.BY_NAME["heartbeat_interval"].default)
"""At least one log line every five minutes while a gang waits (``[gang] heartbeat_interval``)."""
DEFAULT_WATCH_TIMEOUT_SECONDS = int(deployment.BY_NAME["watch_timeout"].default)


@dataclass(frozen=True)
class DeleteTarget:
    """Objects ``on_kill`` deletes: of kind ``resource`` (``kube.resources.Resource.key``), the one
    named ``name`` and every one matching ``label_selector`` (either may be empty)."""

    resource: str
    name: str | None = None
    label_selector: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "name": self.name, "label_selector": self.label_selector}

    @classmethod
    def from_dict(cls, data: Any) -> DeleteTarget:
        return cls(**record_values(cls, data, {"resource": str, "name": str, "label_selector": str}))


@dataclass(frozen=True)
class TriggerArguments:
    """The arguments of one gang trigger (see the module docstring, field by field)."""

    gang_name: str
    namespace: str
    deadline: float
    mode: ReservationMode
    size: int
    started_at: float
    kubernetes_conn_id: str | None = None
    connection: Mapping[str, Any] | None = None
    provisioning_request: str | None = None
    workload_selector: str | None = None
    pod_selector: str | None = None
    scheduling_gate: str | None = None
    deadline_reason: Reason = Reason.DEADLINE
    startup_deadline: float | None = None
    pods_from_job: bool | None = None
    read_checkpoints: bool = False
    log_ranks: tuple[int, ...] = ()
    preemption_taints: tuple[str, ...] = cloud.GKE.preemption_taints
    delete_on_kill: tuple[DeleteTarget, ...] = ()
    client_options: Mapping[str, Any] = field(default_factory=dict)
    watch_timeout_seconds: int = DEFAULT_WATCH_TIMEOUT_SECONDS
    try_number: int | None = None
    unreachable_seconds: float = 600.0  # stored format: what triggers serialized without it meant
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    tries_allowed: int | None = None
    step_description: str | None = None
    members_kubernetes_conn_id: str | None = None
    job_name: str | None = None

    def __post_init__(self) -> None:
        if (self.kubernetes_conn_id is None) == (self.connection is None):
            raise RecordError(type(self).__name__, "kubernetes_conn_id", "and 'connection': give exactly one")

    @property
    def members_from_job(self) -> bool:
        """``pods_from_job``, its ``None`` resolved: members come from a Job in ``kueue`` mode."""
        return self.mode is ReservationMode.KUEUE if self.pods_from_job is None else self.pods_from_job

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": CURRENT_VERSION,
            "kubernetes_conn_id": self.kubernetes_conn_id,
            "connection": None if self.connection is None else dict(self.connection),
            "gang_name": self.gang_name,
            "namespace": self.namespace,
            "deadline": self.deadline,
            "mode": self.mode.value,
            "size": self.size,
            "started_at": self.started_at,
            "provisioning_request": self.provisioning_request,
            "workload_selector": self.workload_selector,
            "pod_selector": self.pod_selector,
            "scheduling_gate": self.scheduling_gate,
            "deadline_reason": self.deadline_reason.value,
            "startup_deadline": self.startup_deadline,
            "pods_from_job": self.pods_from_job,
            "read_checkpoints": self.read_checkpoints,
            "log_ranks": list(self.log_ranks),
            "preemption_taints": list(self.preemption_taints),
            "delete_on_kill": [target.to_dict() for target in self.delete_on_kill],
            "client_options": dict(self.client_options),
            "watch_timeout_seconds": self.watch_timeout_seconds,
            "try_number": self.try_number,
            "unreachable_seconds": self.unreachable_seconds,
            "heartbeat_seconds": self.heartbeat_seconds,
            "tries_allowed": self.tries_allowed,
            "step_description": self.step_description,
            "members_kubernetes_conn_id": self.members_kubernetes_conn_id,
            "job_name": self.job_name,
        }

    @classmethod
    def from_dict(cls, data: Any) -> TriggerArguments:
        return cls(
            **record_values(
                cls,
                data,
                {
                    "connection": dict,
                    "deadline": float,
                    "mode": ReservationMode,
                    "size": int,
                    "started_at": float,
                    "deadline_reason": Reason,
                    "startup_deadline": float,
                    "pods_from_job": bool,
                    "read_checkpoints": bool,
                    "log_ranks": lambda ranks: tuple(int(rank) for rank in ranks),
                    "preemption_taints": lambda keys: tuple(str(key) for key in keys),
                    "delete_on_kill": lambda targets: tuple(DeleteTarget.from_dict(target) for target in targets),
                    "client_options": dict,
                    "watch_timeout_seconds": int,
                    "try_number": int,
                    "unreachable_seconds": float,
                    "heartbeat_seconds": float,
                    "tries_allowed": int,
                    "members_kubernetes_conn_id": optional_text,
                    "job_name": optional_text,
                },
            )
        )

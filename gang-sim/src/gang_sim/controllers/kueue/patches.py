"""What the Kueue helpers decide, as data: the patches the manager applies through the Store.

Every helper of this package reads a snapshot (:mod:`.snapshot`) and returns a list of these; only
:class:`~.manager.KueueManager` talks to the Store. The split follows upstream kubernetes-sigs/kueue,
where the scheduler computes an admission on its snapshot (``pkg/scheduler/scheduler.go``) and
``pkg/workload/workload.go`` ``ApplyAdmissionStatus`` writes it, and the workload controller
(``pkg/controller/core/workload_controller.go``) sets conditions through the status subresource.

Patches are applied in list order; a failing one stops the rest of its list (the object's
reconcile fails as a whole, as a controller-runtime reconcile returning an error does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gang_sim.controllers.base import Obj


class Condition(NamedTuple):
    """One condition to set: ``(type, status, reason, message)``."""

    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class WorkloadStatus:
    """A status write on the Workload being reconciled.

    ``conditions`` are set on top of the stored ones (``meta.SetStatusCondition`` with the Workload's
    ``observedGeneration``); ``fields`` replace top-level status fields (``admission``,
    ``admissionChecks``, ``requeueState``; ``None`` removes the field, as a merge patch does).
    """

    conditions: tuple[Condition, ...] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CreateObject:
    """Create ``body`` in ``namespace``.

    ``exists_ok`` ignores 409 AlreadyExists. Each of ``adopters`` (pods) then gets a non-controller
    ownerReference to the created object, after its existing ones.
    """

    resource: str
    namespace: str
    body: Obj
    exists_ok: bool = False
    adopters: tuple[Obj, ...] = ()


@dataclass(frozen=True)
class PatchObject:
    """``Store.patch(resource, name, body, namespace=..., subresource=..., patch_type=...)``."""

    resource: str
    name: str
    body: Obj
    namespace: str | None = None
    subresource: str | None = None
    patch_type: str = "merge"


@dataclass(frozen=True)
class DeleteObject:
    resource: str
    name: str
    namespace: str


@dataclass(frozen=True)
class DeleteControlled:
    """Delete every object of ``resource`` in ``namespace`` whose controller ownerReference has ``owner_uid``.

    Resolved against the Store when applied, so objects created earlier in the same list go too.
    """

    resource: str
    namespace: str
    owner_uid: str


@dataclass(frozen=True)
class RecordEvent:
    """An Event about ``subject`` (None: the object being reconciled).

    ``once_key``: record it only the first time the manager sees this key.
    """

    reason: str
    message: str
    warning: bool = False
    subject: Obj | None = None
    once_key: tuple[str, ...] | None = None


@dataclass(frozen=True)
class AssumeUsage:
    """Count an admission's ``podSetAssignments`` against ``cluster_queue`` for the rest of the pass,
    and its ``topology_usage`` (flavor -> leaf id -> resources) against the TAS flavors' domains.

    Upstream ``pkg/scheduler/scheduler.go`` assumes the workload in the cache before the admission
    is written, so later workloads of the same cycle see the quota (and the topology) taken.
    """

    cluster_queue: str
    pod_set_assignments: tuple[Mapping[str, Any], ...]
    topology_usage: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordAdmission:
    """Remember (``at``) or forget (``None``) when the Workload ``uid`` was admitted: the
    waitForPodsReady timeout counts from it."""

    uid: str
    at: float | None


@dataclass(frozen=True)
class RequeueAt:
    """Keep the Workload ``uid`` from a new reservation before simulated time ``at``."""

    uid: str
    at: float


Patch = (
    WorkloadStatus
    | CreateObject
    | PatchObject
    | DeleteObject
    | DeleteControlled
    | RecordEvent
    | AssumeUsage
    | RecordAdmission
    | RequeueAt
)


@dataclass(frozen=True)
class Batch:
    """The patches about one object, planned when applied.

    The manager calls ``plan`` and applies its patches in a guard on ``subject``, so an object whose
    planning or writing fails is reported alone (a ``ReconcileError`` Event) and the rest proceed.
    """

    subject: Obj
    plan: Callable[[], Sequence[Patch]]

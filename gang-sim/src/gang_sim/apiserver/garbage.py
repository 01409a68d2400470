"""Deletion with finalizers, and ownerReference garbage collection, as plans the store applies.

Follows the garbage collector's documented semantics
(https://kubernetes.io/docs/concepts/architecture/garbage-collection/):

- an object with finalizers is only marked (``deletionTimestamp``, MODIFIED event) and removed once
  the finalizers are cleared; no new finalizers may be added while it is being deleted;
- ``Orphan``: the owner gets the ``orphan`` finalizer, dependents lose their ownerReference to it and
  stay, then the finalizer is removed;
- ``Background``: the owner goes first, then dependents whose owners are all gone are deleted
  (a dependent with another live owner only loses the reference);
- ``Foreground``: the owner gets the ``foregroundDeletion`` finalizer, its dependents are deleted,
  and the owner is removed once none remain.

This module only decides; it reads the objects through an :class:`ObjectsView` and writes nothing.
:func:`plan_delete` answers a delete request with a :class:`DeletionPlan` (the apiserver's part:
``Delete`` and ``updateForGracefulDeletionAndFinalizers`` in
``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go``), :func:`plan_collection`
answers a removal with the collector's work (``attemptToDeleteItem``, ``orphanDependents`` and
``processDeletingDependentsItem`` in ``pkg/controller/garbagecollector/garbagecollector.go``).

A plan is a sequence of steps. :class:`Commit` and :class:`Remove` are writes, computed in full.
Every other step is a decision that depends on the state the earlier steps leave (a dependent
removed meanwhile, an owner reference already dropped, the time of the mark), so it is made when
the applier reaches it: the applier hands it to ``step.resolve(view)`` for the steps it stands for,
as upstream's collector reads each object afresh before acting on it. Unlike the real controller,
collection runs synchronously inside the deleting call, so tests see its result at once; event
order matches upstream (owner change before dependents' deletions).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from gang_sim.apiserver import errors, pod_grace
from gang_sim.apiserver.owner_index import ObjectId, owner_uids
from gang_sim.apiserver.registry import ResourceType

Object = dict[str, Any]
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
POLICIES = ("Orphan", "Background", "Foreground")


class OwnerLookup(Protocol):
    """The owner index, read-only (:class:`.owner_index.OwnerIndex`)."""

    def dependents_of(self, owner_uid: str) -> list[ObjectId]: ...

    def object_id_of(self, uid: str) -> ObjectId | None: ...


class ObjectsView(Protocol):
    """What the planner reads of the store (the stored objects are shared: never mutate them)."""

    @property
    def registry(self) -> Iterable[ResourceType]: ...

    @property
    def owners(self) -> OwnerLookup: ...

    def stored(self, object_id: ObjectId) -> Object | None: ...

    def type_of(self, storage_key: str) -> ResourceType: ...

    def iter_objects(self, storage_key: str) -> Iterator[Object]: ...

    def timestamp(self, after_seconds: int = 0) -> str: ...


def default_policy(resource_type: ResourceType) -> str:
    """Upstream default: Orphan for batch/v1 Jobs (legacy ``DefaultGarbageCollectionPolicy``)."""
    return "Orphan" if resource_type.storage_key == "batch/jobs" else "Background"


def finalizer_causes(new: Object, old: Object) -> list[errors.Cause]:
    """No new finalizers on an object that is being deleted (upstream ValidateObjectMetaUpdate)."""
    if not old["metadata"].get("deletionTimestamp"):
        return []
    added = set(new["metadata"].get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
    if not added:
        return []
    return [
        errors.field_cause(
            "FieldValueForbidden",
            "metadata.finalizers",
            "Forbidden: no new finalizers can be added if the object is being deleted, found new "
            "finalizers []string{" + ", ".join(f'"{name}"' for name in sorted(added)) + "}",  # Go's %#v
        )
    ]


# ----------------------------------------------------------------- writes


@dataclass(frozen=True)
class Commit:
    """Write ``new`` over ``old`` (a MODIFIED event); ``new`` is a new object, handed to the store."""

    resource_type: ResourceType
    new: Object
    old: Object


@dataclass(frozen=True)
class Remove:
    """Remove the object with ``last`` as its final state (a DELETED event); ``old`` is the stored one.

    The store then applies :func:`plan_collection` for it.
    """

    resource_type: ResourceType
    last: Object
    old: Object


def _metadata_write(view: ObjectsView, object_id: ObjectId, changes: Iterable[tuple[str, Any]]) -> tuple[Step, ...]:
    """A controller's metadata-only write (no admission); ``None`` values drop the field.

    Clearing the last finalizer of an object being deleted removes its stored state, as upstream,
    unless a graceful deletion is still under way (``deletionGracePeriodSeconds`` > 0: the kubelet's
    delete with grace 0 removes it; ``ShouldDeleteDuringUpdate`` in apiserver ``registry/store.go``).
    """
    current = view.stored(object_id)
    if current is None:
        return ()
    new = dict(current)
    new["metadata"] = copy.deepcopy(current["metadata"])
    for key, value in changes:
        if value is None:
            new["metadata"].pop(key, None)
        else:
            new["metadata"][key] = value
    resource_type = view.type_of(object_id[0])
    deleting = new["metadata"].get("deletionTimestamp") and not new["metadata"].get("deletionGracePeriodSeconds")
    if deleting and not new["metadata"].get("finalizers"):
        return (Remove(resource_type, current, current),)
    return (Commit(resource_type, new, current),)


# ----------------------------------------------------------------- decisions made when reached


@dataclass(frozen=True)
class MarkDeleting:
    """Set ``deletionTimestamp`` (now), ``deletionGracePeriodSeconds: 0`` and ``finalizers``."""

    object_id: ObjectId
    finalizers: tuple[str, ...]

    def resolve(self, view: ObjectsView) -> tuple[Step, ...]:
        changes = (
            ("deletionTimestamp", view.timestamp()),
            ("deletionGracePeriodSeconds", 0),
            ("finalizers", list(self.finalizers)),
        )
        return _metadata_write(view, self.object_id, changes)


@dataclass(frozen=True)
class DropOwnerReference:
    """Remove the ownerReference to ``owner_uid`` from a dependent that still exists."""

    object_id: ObjectId
    owner_uid: str

    def resolve(self, view: ObjectsView) -> tuple[Step, ...]:
        current = view.stored(self.object_id)
        if current is None:
            return ()
        references = [r for r in current["metadata"].get("ownerReferences") or [] if r.get("uid") != self.owner_uid]
        return _metadata_write(view, self.object_id, (("ownerReferences", references or None),))


@dataclass(frozen=True)
class ReleaseFinalizer:
    """Remove one finalizer (the garbage collector's part); the object goes once none is left."""

    object_id: ObjectId
    finalizer: str

    def resolve(self, view: ObjectsView) -> tuple[Step, ...]:
        current = view.stored(self.object_id)
        if current is None or self.finalizer not in (current["metadata"].get("finalizers") or []):
            return ()
        rest = [f for f in current["metadata"]["finalizers"] if f != self.finalizer]
        return _metadata_write(view, self.object_id, (("finalizers", rest or None),))


@dataclass(frozen=True)
class DeleteObject:
    """Delete an object, as it is when reached, with ``policy`` (no grace period requested).

    ``resource_type`` None: the first served version of its storage key.
    """

    object_id: ObjectId
    policy: str
    resource_type: ResourceType | None = None

    def resolve(self, view: ObjectsView) -> tuple[Step, ...]:
        current = view.stored(self.object_id)
        if current is None:
            return ()
        resource_type = view.type_of(self.object_id[0]) if self.resource_type is None else self.resource_type
        return plan_delete(view, resource_type, current, self.policy).steps


@dataclass(frozen=True)
class DeleteNamespaceContents:
    """Delete (Background) every object of one namespaced type in ``namespace``, as stored when reached."""

    resource_type: ResourceType
    namespace: str

    def resolve(self, view: ObjectsView) -> tuple[Step, ...]:
        key = self.resource_type.storage_key
        return tuple(
            DeleteObject((key, self.namespace, obj["metadata"]["name"]), "Background", self.resource_type)
            for obj in view.iter_objects(key)
            if obj["metadata"].get("namespace") == self.namespace
        )


@dataclass(frozen=True)
class OrphanDependents:
    """Drop the ownerReference to ``owner_uid`` from each current dependent (upstream ``orphanDependents``)."""

    owner_uid: str

    def resolve(self, view: ObjectsView) -> tuple[Step, ...]:
        dependents = view.owners.dependents_of(self.owner_uid)
        return tuple(DropOwnerReference(dependent, self.owner_uid) for dependent in dependents)


@dataclass(frozen=True)
class DeleteDependentsInForeground:
    """Delete each current dependent of ``owner_uid`` in foreground (``processDeletingDependentsItem``)."""

    owner_uid: str

    def resolve(self, view: ObjectsView) -> tuple[Step, ...]:
        return tuple(DeleteObject(dependent, "Foreground") for dependent in view.owners.dependents_of(self.owner_uid))


@dataclass(frozen=True)
class FinishForeground:
    """Release the ``foregroundDeletion`` finalizer of ``owner_uid`` once no dependents remain."""

    owner_uid: str

    def resolve(self, view: ObjectsView) -> tuple[Step, ...]:
        owner_id = view.owners.object_id_of(self.owner_uid)
        if owner_id is None or view.owners.dependents_of(self.owner_uid):
            return ()
        return (ReleaseFinalizer(owner_id, FOREGROUND),)


@dataclass(frozen=True)
class CollectDependent:
    """A dependent of the removed ``owner_uid``: deleted (Background) unless another owner still
    exists, in which case it only loses the reference (upstream ``attemptToDeleteItem``)."""

    object_id: ObjectId
    owner_uid: str

    def resolve(self, view: ObjectsView) -> tuple[Step, ...]:
        current = view.stored(self.object_id)
        if current is None:
            return ()
        live_owners = owner_uids(current) - {self.owner_uid}
        if any(view.owners.object_id_of(owner) is not None for owner in live_owners):
            return (DropOwnerReference(self.object_id, self.owner_uid),)
        return (DeleteObject(self.object_id, "Background"),)


Step = (
    Commit
    | Remove
    | MarkDeleting
    | DropOwnerReference
    | ReleaseFinalizer
    | DeleteObject
    | DeleteNamespaceContents
    | OrphanDependents
    | DeleteDependentsInForeground
    | FinishForeground
    | CollectDependent
)


# ----------------------------------------------------------------- plans


@dataclass(frozen=True)
class DeletionPlan:
    """The steps of one delete request, in order: ``before`` (a namespace's contents), ``own`` (the
    write to the object itself: its mark or its removal; None: nothing to write), ``after`` (what
    its propagation policy does to its dependents).

    The request answers the object as ``own`` leaves it, or ``unchanged`` when ``own`` writes nothing.
    """

    before: tuple[Step, ...]
    own: Step | None
    after: tuple[Step, ...]
    unchanged: Object

    @property
    def steps(self) -> tuple[Step, ...]:
        return (*self.before, *(() if self.own is None else (self.own,)), *self.after)


def _plan_pod_deleted_again(
    view: ObjectsView, resource_type: ResourceType, pod: Object, requested: int | None
) -> DeletionPlan:
    """A delete of a pod already being deleted: one whose grace period is 0 goes at once unless
    finalizers hold it; otherwise only a shorter period changes it (:func:`.pod_grace.shortened`), and
    a period shortened to 0 removes it unless finalizers hold it."""
    metadata = pod["metadata"]
    finalizers = metadata.get("finalizers")
    if not metadata.get("deletionGracePeriodSeconds"):
        return DeletionPlan((), None if finalizers else Remove(resource_type, pod, pod), (), pod)
    change = pod_grace.shortened(metadata, requested, view.timestamp())
    if change is None:
        return DeletionPlan((), None, (), pod)
    period, remaining = change
    new = pod_grace.stamped(pod, view.timestamp(remaining), period)
    if period == 0 and not finalizers:
        return DeletionPlan((), Remove(resource_type, new, pod), (), pod)
    return DeletionPlan((), Commit(resource_type, copy.deepcopy(new), pod), (), pod)


def _namespace_contents(view: ObjectsView, namespace: str) -> tuple[Step, ...]:
    """One step per namespaced type, at its storage version (each object is stored once)."""
    return tuple(
        DeleteNamespaceContents(resource_type, namespace)
        for resource_type in list(view.registry)
        if resource_type.namespaced
        and resource_type.version == (resource_type.storage_version or resource_type.version)
    )


def plan_delete(
    view: ObjectsView, resource_type: ResourceType, obj: Object, policy: str, grace_period_seconds: int | None = None
) -> DeletionPlan:
    """How to delete the stored ``obj`` with a propagation policy (one of :data:`POLICIES`).

    Pods are deleted gracefully, with the period upstream's pod strategy gives (:mod:`.pod_grace`):
    a pod bound to a node and not finished is only marked - ``deletionTimestamp`` = now + grace
    period, ``deletionGracePeriodSeconds``, ``generation`` + 1 - until a delete with
    ``grace_period_seconds=0`` (its kubelet's, once the containers stopped and their statuses are
    written) removes it; any other pod is removed at once, ``deletionTimestamp`` and
    ``deletionGracePeriodSeconds: 0`` on its last state. A delete of a pod already being deleted may
    only shorten its period (:func:`_plan_pod_deleted_again`).
    Orphan and Foreground deletes always mark first, with the ``orphan`` / ``foregroundDeletion``
    finalizer (upstream ``deletionFinalizersForGarbageCollection``); a pod's graceful mark carries it
    too (``updateForGracefulDeletionAndFinalizers``).
    """
    metadata = obj["metadata"]
    object_id: ObjectId = (resource_type.storage_key, metadata.get("namespace") or "", metadata["name"])
    is_pod = resource_type.storage_key == "/pods"
    if metadata.get("deletionTimestamp"):
        if is_pod:
            return _plan_pod_deleted_again(view, resource_type, obj, grace_period_seconds)
        return DeletionPlan((), None, (), obj)
    uid = metadata["uid"]
    before = _namespace_contents(view, metadata["name"]) if resource_type.storage_key == "/namespaces" else ()
    finalizers = list(metadata.get("finalizers") or [])
    gc_finalizer = {"Orphan": ORPHAN, "Foreground": FOREGROUND}.get(policy)
    if gc_finalizer and gc_finalizer not in finalizers:  # upstream marks every Orphan/Foreground delete
        finalizers.append(gc_finalizer)
    after: tuple[Step, ...] = ()
    if policy == "Orphan":
        after = (OrphanDependents(uid), ReleaseFinalizer(object_id, ORPHAN))
    elif policy == "Foreground":
        after = (DeleteDependentsInForeground(uid), FinishForeground(uid))
    grace = pod_grace.grace_seconds(obj, grace_period_seconds) if is_pod else 0
    if grace > 0:  # marked: the kubelet's delete with grace 0 removes it
        held = {"finalizers": finalizers} if finalizers else {}
        marked = pod_grace.stamped(obj, view.timestamp(grace), grace, **pod_grace.first_mark(obj), **held)
        return DeletionPlan(before, Commit(resource_type, copy.deepcopy(marked), obj), after, obj)
    if not finalizers:
        last = pod_grace.stamped(obj, view.timestamp(), 0, **pod_grace.first_mark(obj)) if is_pod else obj
        return DeletionPlan(before, Remove(resource_type, last, obj), (), obj)
    return DeletionPlan(before, MarkDeleting(object_id, tuple(finalizers)), after, obj)


def plan_collection(removed: Object, dependents: Iterable[ObjectId]) -> tuple[Step, ...]:
    """The collector's work once ``removed`` is gone: its ``dependents`` (as the owner index listed
    them) are collected, then its owners waiting in foreground deletion may be released."""
    uid = removed["metadata"].get("uid", "")
    collected = tuple(CollectDependent(dependent, uid) for dependent in dependents)
    return (*collected, *(FinishForeground(owner_uid) for owner_uid in owner_uids(removed)))

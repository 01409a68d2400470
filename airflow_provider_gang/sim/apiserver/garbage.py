"""Deletion with finalizers, and ownerReference garbage collection.

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

Unlike the real controller, collection runs synchronously inside the deleting call, so tests see
its result at once; event order matches upstream (owner change before dependents' deletions).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from airflow_provider_gang.sim.apiserver import errors
from airflow_provider_gang.sim.apiserver.registry import ResourceType

if TYPE_CHECKING:
    from airflow_provider_gang.sim.apiserver.object_table import ObjectTable
    from airflow_provider_gang.sim.apiserver.store import ObjectId, Store

Object = dict[str, Any]
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


def default_policy(resource_type: ResourceType) -> str:
    """Upstream default: Orphan for batch/v1 Jobs (legacy ``DefaultGarbageCollectionPolicy``)."""
    return "Orphan" if resource_type.storage_key == "batch/jobs" else "Background"


def _owner_uids(obj: Object | None) -> set[str]:
    if obj is None:
        return set()
    return {ref["uid"] for ref in (obj.get("metadata") or {}).get("ownerReferences") or [] if ref.get("uid")}


def index_owners(store: ObjectTable, object_id: ObjectId, old: Object | None, new: Object, event_type: str) -> None:
    """Keep ``store.dependents`` (owner uid -> dependents) and ``store.uids`` in step with a commit."""
    uid = new["metadata"].get("uid", "")
    before = _owner_uids(old)
    after = set() if event_type == "DELETED" else _owner_uids(new)
    for owner in before - after:
        bucket = store.dependents.get(owner)
        if bucket is not None:
            bucket.discard(object_id)
            if not bucket:
                del store.dependents[owner]
    for owner in after - before:
        store.dependents.setdefault(owner, set()).add(object_id)
    if event_type == "DELETED":
        store.uids.pop(uid, None)
    elif uid:
        store.uids[uid] = object_id


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


def _rewrite_metadata(store: Store, object_id: ObjectId, **changes: Any) -> Object | None:
    """Commit a metadata-only change to a stored object, bypassing admission (a controller's write)."""
    current = store.stored(object_id)
    if current is None:
        return None
    new = dict(current)
    new["metadata"] = copy.deepcopy(current["metadata"])
    for key, value in changes.items():
        if value is None:
            new["metadata"].pop(key, None)
        else:
            new["metadata"][key] = value
    resource_type = store.type_of(object_id[0])
    if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
        return store._remove(resource_type, current, current)  # the stored state, as upstream's delete
    return store._commit(resource_type, "MODIFIED", new, current)


def _drop_owner(store: Store, object_id: ObjectId, owner_uid: str) -> None:
    current = store.stored(object_id)
    if current is None:
        return
    references = [r for r in current["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
    _rewrite_metadata(store, object_id, ownerReferences=references or None)


def _pod_grace_seconds(store: Store, pod: Object, requested: int | None) -> int:
    """Seconds of graceful deletion for a pod (0: remove now), as upstream's pod strategy decides:
    unscheduled or finished pods go at once; others wait for their kubelet (opt-in, see Store)."""
    if not store.graceful_pod_deletion or requested == 0:
        return 0
    if not (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    return int(requested if requested is not None else (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))


def delete(
    store: Store, resource_type: ResourceType, obj: Object, policy: str, grace_period_seconds: int | None = None
) -> Object:
    """Delete ``obj`` with a propagation policy; returns its last or terminating state.

    Pods are removed at once with ``deletionTimestamp`` and ``deletionGracePeriodSeconds: 0`` on
    their last state, like an unscheduled pod upstream. With ``store.graceful_pod_deletion`` a pod
    bound to a node is only marked (``deletionTimestamp`` = now + grace period) until a delete
    with ``grace_period_seconds=0`` (the kubelet's, once its containers stopped) removes it.
    """
    from airflow_provider_gang.sim.apiserver.store import rfc3339

    metadata = obj["metadata"]
    object_id: ObjectId = (resource_type.storage_key, metadata.get("namespace") or "", metadata["name"])
    is_pod = resource_type.storage_key == "/pods"
    grace = _pod_grace_seconds(store, obj, grace_period_seconds) if is_pod else 0
    if metadata.get("deletionTimestamp"):
        if is_pod and grace == 0 and grace_period_seconds == 0 and not metadata.get("finalizers"):
            return store._remove(resource_type, _stamped(obj, rfc3339(store._wall_clock()), 0), obj)
        return obj
    if grace > 0:  # marked only: a direct commit, since no finalizer holds it
        marked = _stamped(obj, rfc3339(store._wall_clock() + grace), grace)
        return store._commit(resource_type, "MODIFIED", copy.deepcopy(marked), obj)
    uid = metadata["uid"]
    if resource_type.storage_key == "/namespaces":
        _empty_namespace(store, metadata["name"])
    finalizers = list(metadata.get("finalizers") or [])
    gc_finalizer = {"Orphan": ORPHAN, "Foreground": FOREGROUND}.get(policy)
    if gc_finalizer and gc_finalizer not in finalizers:  # upstream marks every Orphan/Foreground delete
        finalizers.append(gc_finalizer)
    if not finalizers:
        last = _stamped(obj, rfc3339(store._wall_clock()), 0) if is_pod else obj
        return store._remove(resource_type, last, obj)
    held = _rewrite_metadata(
        store,
        object_id,
        deletionTimestamp=rfc3339(store._wall_clock()),
        deletionGracePeriodSeconds=0,
        finalizers=finalizers,
    )
    answer = copy.deepcopy(held) if held is not None else obj  # what the API answers: the marked object
    if policy == "Orphan":
        for dependent in sorted(store.dependents.get(uid, set())):
            _drop_owner(store, dependent, uid)
        _release(store, object_id, ORPHAN)
    elif policy == "Foreground":
        for dependent in sorted(store.dependents.get(uid, set())):
            current = store.stored(dependent)
            if current is not None:
                delete(store, store.type_of(dependent[0]), current, "Foreground")
        _finish_foreground(store, uid)
    return answer


def _release(store: Store, object_id: ObjectId, finalizer: str) -> None:
    """Remove one finalizer (the garbage collector's part); the object goes once none is left."""
    current = store.stored(object_id)
    if current is not None and finalizer in (current["metadata"].get("finalizers") or []):
        rest = [f for f in current["metadata"]["finalizers"] if f != finalizer]
        _rewrite_metadata(store, object_id, finalizers=rest or None)


def _stamped(obj: Object, deletion_timestamp: str, grace_seconds: int) -> Object:
    stamped = dict(obj)
    stamped["metadata"] = dict(
        obj["metadata"], deletionTimestamp=deletion_timestamp, deletionGracePeriodSeconds=grace_seconds
    )
    return stamped


def _empty_namespace(store: Store, namespace: str) -> None:
    for resource_type in list(store.registry):
        if not resource_type.namespaced or resource_type.version != (
            resource_type.storage_version or resource_type.version
        ):
            continue
        for obj in list(store.iter_objects(resource_type.storage_key)):
            if obj["metadata"].get("namespace") == namespace:
                current = store.stored((resource_type.storage_key, namespace, obj["metadata"]["name"]))
                if current is not None:
                    delete(store, resource_type, current, "Background")


def _finish_foreground(store: Store, owner_uid: str) -> None:
    """Remove the foregroundDeletion finalizer once no dependents remain."""
    owner_id = store.uids.get(owner_uid)
    if owner_id is not None and not store.dependents.get(owner_uid):
        _release(store, owner_id, FOREGROUND)


def after_removal(store: Store, removed: Object) -> None:
    """Collect the dependents of a removed object and release owners waiting in foreground deletion."""
    uid = removed["metadata"].get("uid", "")
    for dependent in sorted(store.dependents.pop(uid, set())):
        current = store.stored(dependent)
        if current is None:
            continue
        live_owners = _owner_uids(current) - {uid}
        if any(owner in store.uids for owner in live_owners):
            _drop_owner(store, dependent, uid)
        else:
            delete(store, store.type_of(dependent[0]), current, "Background")
    for owner_uid in _owner_uids(removed):
        owner_id = store.uids.get(owner_uid)
        owner = store.stored(owner_id) if owner_id else None
        if owner is not None and FOREGROUND in (owner["metadata"].get("finalizers") or []):
            _finish_foreground(store, owner_uid)

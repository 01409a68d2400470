"""The owner index: which stored objects name a uid in their ``metadata.ownerReferences``.

The garbage collector's dependency graph, kept in step with every commit of the object table
instead of being rebuilt from informers (upstream ``pkg/controller/garbagecollector/graph_builder.go``
maintains the same uid -> dependents edges). Read by :mod:`.garbage` to plan deletions.
"""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]
ObjectId = tuple[str, str, str]  # (storage key, namespace, name)


def owner_uids(obj: Object | None) -> set[str]:
    """The uids ``obj`` names in its ownerReferences (none for ``None``)."""
    if obj is None:
        return set()
    return {ref["uid"] for ref in (obj.get("metadata") or {}).get("ownerReferences") or [] if ref.get("uid")}


class OwnerIndex:
    """Owner uid -> dependents, and uid -> object, for every stored object."""

    def __init__(self) -> None:
        self._dependents: dict[str, set[ObjectId]] = {}  # owner uid -> objects naming it in ownerReferences
        self._object_ids: dict[str, ObjectId] = {}  # uid -> object

    def record(self, object_id: ObjectId, old: Object | None, new: Object, event_type: str) -> None:
        """Follow one committed change (``new`` is the DELETED object's last state for a removal)."""
        uid = new["metadata"].get("uid", "")
        before = owner_uids(old)
        after = set() if event_type == "DELETED" else owner_uids(new)
        for owner in before - after:
            bucket = self._dependents.get(owner)
            if bucket is not None:
                bucket.discard(object_id)
                if not bucket:
                    del self._dependents[owner]
        for owner in after - before:
            self._dependents.setdefault(owner, set()).add(object_id)
        if event_type == "DELETED":
            self._object_ids.pop(uid, None)
        elif uid:
            self._object_ids[uid] = object_id

    def dependents_of(self, owner_uid: str) -> list[ObjectId]:
        """The objects naming ``owner_uid`` as an owner, sorted."""
        return sorted(self._dependents.get(owner_uid, ()))

    def object_id_of(self, uid: str) -> ObjectId | None:
        """The stored object with ``uid``, if any."""
        return self._object_ids.get(uid)

    def take_dependents(self, owner_uid: str) -> list[ObjectId]:
        """Forget the dependents of a removed owner and return them, sorted (the collector's work list)."""
        return sorted(self._dependents.pop(owner_uid, set()))

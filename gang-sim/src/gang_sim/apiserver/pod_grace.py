"""How long a deleted pod is given, as upstream's pod strategy and ``rest.BeforeDelete`` decide.

A DELETE of a pod bound to a node does not remove it: it is marked with ``deletionTimestamp`` and
``deletionGracePeriodSeconds`` and left to its kubelet, which deletes it with grace 0 once its
containers stopped (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination).
Pure functions of the stored pod and the request; :mod:`.garbage` builds the deletion plans from them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

Object = dict[str, Any]


def grace_seconds(pod: Object, requested: int | None) -> int:
    """Seconds of graceful deletion for a pod not yet being deleted (0: remove now), as
    ``CheckGracefulDelete`` (``pkg/registry/core/pod/strategy.go``) decides: the request's
    ``gracePeriodSeconds``, else the pod's ``terminationGracePeriodSeconds``; 0 for a pod not bound
    to a node or already finished; a negative request counts as 1 (``rest.BeforeDelete``)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    period = int(requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30))
    return 1 if period < 0 else period


def stamped(obj: Object, deletion_timestamp: str, grace: int, **changes: Any) -> Object:
    """``obj`` with a new metadata carrying the deletion stamp and ``changes`` (the stored one is shared)."""
    copy = dict(obj)
    copy["metadata"] = dict(obj["metadata"], deletionTimestamp=deletion_timestamp, deletionGracePeriodSeconds=grace)
    copy["metadata"].update(changes)
    return copy


def first_mark(obj: Object) -> dict[str, Any]:
    """What a pod's first deletion changes besides the stamp: its ``generation`` goes up
    (``rest.BeforeDelete``: controllers of an object being deleted change their behaviour)."""
    generation = obj["metadata"].get("generation")
    return {"generation": int(generation) + 1} if generation else {}


def shortened(metadata: Object, requested: int | None, now: str) -> tuple[int, int] | None:
    """A new delete of a pod already being deleted with a grace period (``rest.BeforeDelete``,
    apiserver ``pkg/registry/rest/delete.go``): ``(period, seconds from now to its new
    deletionTimestamp)`` when ``requested`` shortens it, else None. The timestamp moves back by the
    difference from the first request's; one already past becomes now, with 1 s of grace
    (still graceful) unless 0 was asked. ``now``: the apiserver's current timestamp."""
    current = int(metadata.get("deletionGracePeriodSeconds") or 0)
    if requested is None or requested >= current:
        return None
    period = max(0, requested)
    remaining = _seconds(str(metadata["deletionTimestamp"])) - current + period - _seconds(now)
    if remaining < 0:
        return min(period, 1), 0
    return period, remaining


def _seconds(stamp: str) -> int:
    """An RFC 3339 time as the apiserver writes it (UTC, whole seconds) in seconds since the epoch."""
    return int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())

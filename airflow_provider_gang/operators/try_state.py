"""The record of the try in progress, as kept under the task state key ``gang.current``.

Written by ``operators.lifecycle`` only: first before any object of the try exists, then after
each stage, and removed when the try is recorded as finished. A worker that dies leaves it behind,
which is how the next try knows what to adopt or withdraw. It is a stored format: a task deferred
by one version of the provider may resume under the next, so :meth:`TryState.from_stored` reads
every earlier version and :data:`VERSION` grows with each change of meaning.

Versions:

- 1 (no ``version`` key): the plan's fields flat, beside ``owner_uid``, ``job_uid``,
  ``reservation_event``, ``launched_at`` and ``size_run``.
- 2: ``{"version": 2, "plan": TryPlan.to_dict(), "objects": [...], ...}`` as :meth:`to_stored` writes.
- 3: as 2; the plan's ``spec`` may carry ``checkpoint`` (``reservation.checkpoint.Checkpoint``: the
  location, try number and resume step). Versions 1 and 2 read with no checkpoint; a provider that
  reads up to 2 refuses a 3 with "upgrade" instead of failing on the unknown spec key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_gang.operators.plan import TryPlan

VERSION = 3


@dataclass(frozen=True)
class ReservedObject:
    """One object a try created or adopted: its resource key (``kube.resources.Resource.key``),
    name and uid - the uid says whether an object found later by that name is still the same one."""

    resource: str
    name: str
    uid: str


@dataclass(frozen=True)
class TryState:
    """The try in progress.

    Fields:
        plan: what the try does (``operators.plan``).
        owner_uid: uid of the gang's owner ConfigMap once created or adopted (children's owner).
        job_uid: uid of the Kueue Job (``kueue`` mode), whose Workload the triggers select by.
        objects: the reservation objects created or adopted, with their uids.
        reservation_event: the ReservationTrigger's event without ``members`` (once it fired).
        launched_at: UNIX time the members were launched; ``size_run``: how many were.
    """

    plan: TryPlan
    owner_uid: str | None = None
    job_uid: str | None = None
    objects: tuple[ReservedObject, ...] = field(default=())
    reservation_event: dict[str, Any] | None = None
    launched_at: float | None = None
    size_run: int | None = None

    def with_changes(self, **changes: Any) -> TryState:
        return replace(self, **changes)

    def to_stored(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "plan": self.plan.to_dict(),
            "owner_uid": self.owner_uid,
            "job_uid": self.job_uid,
            "objects": [{"resource": item.resource, "name": item.name, "uid": item.uid} for item in self.objects],
            "reservation_event": self.reservation_event,
            "launched_at": self.launched_at,
            "size_run": self.size_run,
        }

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> TryState:
        """Read any version (module docstring); ``ValueError`` for a version newer than this code."""
        version = int(data.get("version", 1))
        if version > VERSION:
            raise ValueError(f"gang.current has version {version}; this provider reads up to {VERSION}: upgrade it")
        plan = TryPlan.from_dict(data["plan"] if version >= 2 else data)
        objects = tuple(
            ReservedObject(str(item["resource"]), str(item["name"]), str(item["uid"]))
            for item in data.get("objects") or ()
        )
        launched_at = data.get("launched_at")
        size_run = data.get("size_run")
        return cls(
            plan=plan,
            owner_uid=_optional_str(data.get("owner_uid")),
            job_uid=_optional_str(data.get("job_uid")),
            objects=objects,
            reservation_event=dict(data["reservation_event"]) if data.get("reservation_event") else None,
            launched_at=None if launched_at is None else float(launched_at),
            size_run=None if size_run is None else int(size_run),
        )


def _optional_str(value: Any) -> str | None:
    return None if value in (None, "None", "") else str(value)

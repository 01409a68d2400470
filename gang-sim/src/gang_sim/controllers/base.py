"""The controller loop shared by every simulated controller.

Controllers are *level-triggered*: each pass of :meth:`Controller.reconcile` reads the current state
from the Store and writes only what differs, so a missed or coalesced notification is harmless (the
same property controller-runtime relies on). A pass runs when

- the Store reports a committed change to one of the resources in :attr:`Controller.watches`
  (``Store.subscribe``), or
- the simulated deadline returned by the previous pass is reached (node provisioning delay, booking
  expiry, a container's run time, a backoff), measured on the injected :class:`Clock`.

Robustness contract: a failure while handling one object never stops the controller or the server.
:meth:`Controller.guard` catches it, records a ``Warning`` Event on the object (once per
resourceVersion) and moves on to the next object.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from gang_sim.apiserver.store import Store
from gang_sim.world.clock import Clock
from gang_sim.world.cloud import Cloud
from gang_sim.world.scenario import Scenario

LOG = logging.getLogger(__name__)
Obj = dict[str, Any]


def wall_time() -> str:
    """An RFC 3339 wall-clock timestamp, as object timestamps are (see ``gang_sim.world.clock``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ControlPlane:
    """What every controller shares: the Store, simulated time, randomness, the scenario and cloud."""

    store: Store
    clock: Clock
    scenario: Scenario
    rng: random.Random
    cloud: Cloud
    pod_ips: dict[str, str] = field(default_factory=dict)  # pod uid -> 127.0.0.x
    _reported: set[tuple[str, str]] = field(default_factory=set)

    def record_event(
        self, involved: Obj, reason: str, message: str, *, warning: bool = False, component: str = "gang-sim"
    ) -> None:
        """Create a core/v1 Event about ``involved`` (cluster-scoped objects report into ``default``)."""
        metadata = involved.get("metadata") or {}
        namespace = metadata.get("namespace") or "default"
        now = wall_time()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{metadata.get('name', 'unknown')}.{self.rng.getrandbits(64):016x}"},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", ""),
                "kind": involved.get("kind", ""),
                "name": metadata.get("name", ""),
                "namespace": metadata.get("namespace", ""),
                "uid": metadata.get("uid", ""),
                "resourceVersion": metadata.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.store.create("v1/events", event, namespace)
        except Exception:  # an Event is best effort, as in client-go's recorder
            LOG.exception("could not record event %s for %s", reason, metadata.get("name"))

    def report_failure(self, involved: Obj, component: str, error: BaseException) -> None:
        """Record one ``ReconcileError`` Warning per object version; never raises."""
        metadata = involved.get("metadata") or {}
        key = (str(metadata.get("uid", metadata.get("name"))), str(metadata.get("resourceVersion", "")))
        if key in self._reported:
            return
        self._reported.add(key)
        LOG.warning("%s could not handle %s: %s", component, metadata.get("name"), error)
        self.record_event(
            involved,
            "ReconcileError",
            f"{component}: {type(error).__name__}: {error}",
            warning=True,
            component=component,
        )


class Controller(ABC):
    """One simulated controller: a reconcile pass plus the loop that decides when to run it."""

    #: Component name used in Events (``default-scheduler``, ``kubelet``, ``job-controller`` ...).
    component: str = "gang-sim"
    #: Store resource keys whose changes trigger a pass.
    watches: frozenset[str] = frozenset()
    #: Longest simulated wait between passes even when nothing happens.
    resync_seconds: float = 60.0

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.store = plane.store
        self._dirty = asyncio.Event()
        self._dirty.set()
        self._parked: tuple[asyncio.Future[Any], ...] | None = None
        self.passes = 0

    def is_idle(self) -> bool:
        """Parked in :meth:`_wait` with nothing that would wake it (used to settle a ManualClock)."""
        parked = self._parked
        return not self._dirty.is_set() and parked is not None and not any(future.done() for future in parked)

    def notify(self, event_type: str, resource: str, obj: Obj) -> None:
        """Store subscription callback: mark dirty when a watched resource changed."""
        if resource in self.watches:
            self._dirty.set()

    async def close(self) -> None:
        """Release what the controller holds outside the Store (processes, files); called on stop."""
        return None

    @abstractmethod
    def reconcile(self, now: float) -> float | None:
        """One level-triggered pass; return the simulated time of the next needed pass, if any."""

    @contextlib.contextmanager
    def guard(self, obj: Obj) -> Iterator[None]:
        """Run the handling of one object; a failure becomes a Warning Event instead of a crash."""
        try:
            yield
        except Exception as error:  # see the module docstring: never crash the server
            self.plane.report_failure(obj, self.component, error)

    async def run(self) -> None:
        """Run passes forever (until cancelled)."""
        clock = self.plane.clock
        while True:
            self._dirty.clear()
            try:
                wake_at = self.reconcile(clock.now())
            except Exception:
                LOG.exception("%s pass failed; retrying after resync", self.component)
                wake_at = None
            self.passes += 1
            delay = self.resync_seconds if wake_at is None else min(self.resync_seconds, wake_at - clock.now())
            await self._wait(max(delay, 0.0))

    async def _wait(self, delay: float) -> None:
        if self._dirty.is_set():
            await asyncio.sleep(0)
            return
        dirty = asyncio.ensure_future(self._dirty.wait())
        timer = asyncio.ensure_future(self.plane.clock.sleep(delay))
        self._parked = (dirty, timer)
        try:
            await asyncio.wait({dirty, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._parked = None
            for task in (dirty, timer):
                task.cancel()
            await asyncio.gather(dirty, timer, return_exceptions=True)


def earliest(*times: float | None) -> float | None:
    """The earliest of the given simulated times, ignoring ``None``."""
    present = [value for value in times if value is not None]
    return min(present) if present else None


def condition(obj: Obj, condition_type: str) -> Obj | None:
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == condition_type:
            return dict(item)
    return None


def is_true(obj: Obj, condition_type: str) -> bool:
    found = condition(obj, condition_type)
    return found is not None and found.get("status") == "True"


def set_condition(
    conditions: list[Obj],
    condition_type: str,
    status: str,
    reason: str,
    message: str,
    *,
    always_touch: bool = False,
    extra: Obj | None = None,
) -> list[Obj]:
    """Return ``conditions`` with one condition set.

    ``lastTransitionTime`` changes only when the status changes (``meta.SetStatusCondition``) unless
    ``always_touch``, which mirrors the cluster-autoscaler's ``AddOrUpdateCondition`` that rewrites
    it on every update (reference 1.5). ``extra`` adds fields such as ``observedGeneration`` or the
    ``lastProbeTime`` of pod conditions.
    """
    updated: list[Obj] = []
    found = False
    for item in conditions:
        if item.get("type") != condition_type:
            updated.append(item)
            continue
        found = True
        changed = item.get("status") != status
        new = {**item, "status": status, "reason": reason, "message": message, **(extra or {})}
        if changed or always_touch:
            new["lastTransitionTime"] = wall_time()
        updated.append(new)
    if not found:
        updated.append(
            {
                "type": condition_type,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": wall_time(),
                **(extra or {}),
            }
        )
    return updated


def same_conditions(old: list[Obj], new: list[Obj]) -> bool:
    """Equal ignoring timestamps (used to skip no-op status writes)."""

    def strip(items: list[Obj]) -> list[Obj]:
        return [{k: v for k, v in item.items() if k not in ("lastTransitionTime", "lastProbeTime")} for item in items]

    return strip(old) == strip(new)


def owner_reference(owner: Obj, *, controller: bool = True) -> Obj:
    metadata = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def controlled_by(obj: Obj, owner: Obj) -> bool:
    uid = owner["metadata"]["uid"]
    return any(
        ref.get("uid") == uid and ref.get("controller")
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


def key_of(obj: Obj) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"

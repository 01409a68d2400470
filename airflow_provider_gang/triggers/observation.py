"""From watched objects to :class:`reservation.observed.Observed`: which kinds to watch, and the snapshot.

This is bookkeeping, not judgement: it says which object of each kind belongs to the gang and hands
them to ``reservation.decision.decide``, which alone says what they mean.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.kube.resources import JOBS, POD_GROUPS, PODS, PROVISIONING_REQUESTS, WORKLOADS
from airflow_provider_gang.kube.shared_values import SharedValues
from airflow_provider_gang.kube.watch import Objects
from airflow_provider_gang.reservation import shape
from airflow_provider_gang.reservation.observed import Observed, Stage
from airflow_provider_gang.reservation.spec import ReservationMode

MEMBERS = "members"
"""The ``cluster`` of a watch on the cluster the members run on (:meth:`GangObjects.watches`)."""


@dataclass(frozen=True)
class GangObjects:
    """How to find the gang's objects (all optional; ``None`` means "not watched").

    - ``provisioning_request``: name of the gang's ProvisioningRequest.
    - ``workload_selector``: label selector matching the gang's Kueue Workload (Kueue names it itself;
      if several match, the most recently created one is the gang's current Workload).
    - ``pod_selector``: label selector matching the gang's member pods.
    - ``pod_group``: name of the gang's PodGroup (``workload`` mode).
    - ``job``: name of the gang's Job on a Kueue MultiKueue manager, whose status mirrors the worker's
      Job: all there is to read of the members on a worker without a mapped connection, and the end
      of a run whose pods MultiKueue removed from the worker before they were seen.
    - ``members_elsewhere``: the pods and the Workload are watched on the cluster the members run on
      (a MultiKueue worker), the Job on the trigger's own cluster (:data:`MEMBERS`).
    """

    provisioning_request: str | None = None
    workload_selector: str | None = None
    pod_selector: str | None = None
    pod_group: str | None = None
    job: str | None = None
    members_elsewhere: bool = False

    def watches(self) -> list[dict[str, str]]:
        """The watches a trigger opens: one per kind, each one LIST + one long WATCH; ``"cluster":
        MEMBERS`` marks those on the members' cluster (``members_elsewhere``)."""
        where = {"cluster": MEMBERS} if self.members_elsewhere else {}
        watches = []
        if self.provisioning_request:
            watches.append(
                {"resource": PROVISIONING_REQUESTS.key, "field_selector": f"metadata.name={self.provisioning_request}"}
            )
        if self.workload_selector:
            watches.append({"resource": WORKLOADS.key, "label_selector": self.workload_selector, **where})
        if self.pod_group:
            watches.append({"resource": POD_GROUPS.key, "field_selector": f"metadata.name={self.pod_group}"})
        if self.pod_selector:
            watches.append({"resource": PODS.key, "label_selector": self.pod_selector, **where})
        if self.job:
            watches.append({"resource": JOBS.key, "field_selector": f"metadata.name={self.job}"})
        return watches

    _checked: dict[str, Mapping[str, Mapping[str, Any]]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    """``resource key -> {name: object}``: the objects of the last view :meth:`malformed` read that it
    found readable - that view's own dict of the kind when all were (no copy: a gates gang holds this
    for as long as it waits), else a dict of those found before the first unreadable one."""

    def malformed(self, view: Mapping[str, Objects]) -> str | None:
        """The first object of ``view`` the classifiers cannot read (``reservation.shape``), named.

        An object found readable that is the very same one (identity) in the next view is not checked
        again: a reflector replaces the object of a name on every change and never mutates it, so
        an event costs one check of the changed object, not one per member of the gang (a full
        check of 256 pods costs ~0.1 s of the triggerer's loop). A new dict, even equal, is checked.
        ``view`` is a snapshot its caller does not change afterwards (``FollowedWatches.views`` and
        ``read_now`` hand out copies): its dicts are kept until the next call.
        """
        checked: dict[str, Mapping[str, Mapping[str, Any]]] = {}
        try:
            for key, kind in _KIND_OF_RESOURCE.items():
                objects = view.get(key)
                if not objects:
                    continue
                previous: Mapping[str, Mapping[str, Any]] = self._checked.get(key, {})
                readable: dict[str, Mapping[str, Any]] = {}
                checked[key] = readable
                for name, obj in objects.items():
                    if previous.get(name) is not obj and (problem := shape.malformed(kind, obj)) is not None:
                        return problem
                    readable[name] = obj
                checked[key] = objects  # all readable: the snapshot itself, not a copy
            return None
        finally:
            self._checked.clear()
            self._checked.update(checked)

    def observe(
        self,
        view: Mapping[str, Objects],
        *,
        mode: ReservationMode,
        stage: Stage,
        size: int,
        started_at: float,
        scheduling_gate: str | None = None,
        pods_from_job: bool = False,
    ) -> Observed:
        """The :class:`Observed` snapshot of ``view`` (as yielded by ``GangTrigger.views``)."""
        requests = view.get(PROVISIONING_REQUESTS.key, {})
        workloads = list(view.get(WORKLOADS.key, {}).values())
        pod_groups = view.get(POD_GROUPS.key, {})
        pods = list(view.get(PODS.key, {}).values())
        jobs = view.get(JOBS.key, {})
        return Observed(
            mode=mode,
            stage=stage,
            size=size,
            started_at=started_at,
            provisioning_request=requests.get(self.provisioning_request) if self.provisioning_request else None,
            workload=max(workloads, key=_created, default=None),
            pod_group=pod_groups.get(self.pod_group) if self.pod_group else None,
            pods=tuple(sorted(pods, key=_name)),
            scheduling_gate=scheduling_gate,
            pods_from_job=pods_from_job,
            job=jobs.get(self.job) if self.job else None,
            job_status_only=self.job is not None and not self.pod_selector and stage is Stage.RUN,
        )


_KIND_OF_RESOURCE = {
    PROVISIONING_REQUESTS.key: "ProvisioningRequest",
    WORKLOADS.key: "Workload",
    POD_GROUPS.key: "PodGroup",
    PODS.key: "Pod",
    JOBS.key: "Job",
}


METADATA_KEPT = frozenset(
    (
        "name",
        "namespace",
        "uid",
        "labels",
        "annotations",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
    )
)
"""What of ``metadata`` the cache keeps: the names, labels and annotations the decisions and the
selectors read, the timestamps they compare, ``resourceVersion`` (a relist compares versions), and
what stopping a run's survivors needs (:mod:`.survivors`: the ``uid`` its deletes are preconditioned
on, the grace period a pod being deleted was given)."""
SPEC_KEPT = {PODS.key: frozenset(("terminationGracePeriodSeconds",))}
"""Fields of ``spec`` kept beyond those ``reservation.shape`` has rules for: a member's grace period,
which bounds how long :mod:`.survivors` waits for its report."""

CONDITION_TIMES = ("lastProbeTime", "lastTransitionTime", "lastHeartbeatTime", "lastUpdateTime")
"""Condition fields no classifier reads; without them the conditions of objects in the same state
are equal, so they are held once (:mod:`kube.shared_values`)."""

UNIQUE_STRINGS = frozenset(("metadata.name", "metadata.uid", "metadata.resourceVersion"))
"""Strings no two cached objects share (their names, uids and versions): kept, not interned."""

COMPACT = frozenset(("metadata", "metadata.labels"))
"""Dicts no two cached objects share (a member's rank label makes its labels its own): held as
``kube.frozen_mapping.FrozenMapping`` s, read-only ``Mapping`` s of about half a dict's size."""

_SHARED = SharedValues(compact=COMPACT, unique=UNIQUE_STRINGS)


@functools.cache
def trimmer(resource_key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What the shared watch of a kind caches of each object: ``metadata`` as :data:`METADATA_KEPT`,
    ``status`` without the times of its conditions (:data:`CONDITION_TIMES`), and of ``spec`` only
    the fields ``reservation.shape`` has rules for (``spec.nodeName``, ``spec.nodeSelector``,
    ``spec.schedulingGates`` of a Pod, ``spec.active`` of a Workload) and the names of a Pod's
    containers (``reservation.checkpoint`` reads container 0's status by name). A member's containers
    and environment are most of a Pod, a Workload's pod templates most of it, and ``managedFields``,
    ``ownerReferences`` no decision reads. A field of the wrong type is kept as it is,
    for ``malformed`` to name; so a field a decision starts reading must get a shape rule first.

    The result is built of shared parts (:class:`kube.shared_values.SharedValues`): equal statuses,
    specs, annotations and strings of different objects are one instance each - read-only, as the
    cache's objects always were. One function per kind (cached): the shared watches key their caches
    by it."""
    kept = frozenset(
        path.split(".")[1].removesuffix("[]")
        for path, _ in shape.RULES_BY_KIND[_KIND_OF_RESOURCE[resource_key]]
        if path.startswith("spec.")
    ) | SPEC_KEPT.get(resource_key, frozenset())

    def trim(obj: dict[str, Any]) -> dict[str, Any]:
        trimmed = dict(obj)
        metadata, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
        if isinstance(metadata, dict):
            trimmed["metadata"] = {key: value for key, value in metadata.items() if key in METADATA_KEPT}
        if isinstance(spec, dict):
            trimmed["spec"] = {key: value for key, value in spec.items() if key in kept}
            containers = spec.get("containers")
            if isinstance(containers, list):  # their names only: container 0's status is found by name
                trimmed["spec"]["containers"] = [
                    {"name": item.get("name")} if isinstance(item, dict) else item for item in containers
                ]
        if isinstance(status, dict) and isinstance(status.get("conditions"), list):
            trimmed["status"] = {
                **status,
                "conditions": [
                    {key: value for key, value in item.items() if key not in CONDITION_TIMES}
                    if isinstance(item, dict)
                    else item
                    for item in status["conditions"]
                ],
            }
        shared: dict[str, Any] = _SHARED.share(trimmed)
        return shared

    return trim


def _created(obj: Mapping[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or "")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")

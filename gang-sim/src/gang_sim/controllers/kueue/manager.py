"""The simulated Kueue controller manager: the one part of the package that talks to the Store.

Each pass reads snapshots (:mod:`.snapshot`), asks the pure helpers what to do and applies the
patches they return (:mod:`.patches`), as kubernetes-sigs/kueue's scheduler decides on its cache
snapshot (``pkg/cache/snapshot.go``, ``pkg/scheduler/scheduler.go``) and the workload controller
writes status (``pkg/controller/core/workload_controller.go``, ``pkg/workload/workload.go``
``ApplyAdmissionStatus``). Per pass (reference 2.5-2.9, state machines 7.C-7.E):

1. ``Active`` of ProvisioningRequest AdmissionChecks (:func:`.queues.check_activity`);
2. Workloads for new Jobs, pod groups and single pods (:func:`.integrations.workload_creations`);
3. every Workload in creation order, each in its own guard: :func:`.lifecycle.wait_for_start`,
   :func:`.lifecycle.settle`; then either
   quota reservation (:func:`.scheduler.reserve`, on the usage of every reserving Workload, those
   reserved earlier in the pass included, and for Topology Aware Scheduling on the nodes, the non-TAS
   pods and the TAS usage of the same Workloads: :class:`~.snapshot.TopologyState`) or the
   ProvisioningRequest checks (:func:`.checks.sync_checks`) and their verdict
   (:func:`.lifecycle.judge`); an admitted Workload gets its owner started (:func:`.starter.start`),
   its TAS pods placed and ungated (:func:`.ungater.ungate`) and waitForPodsReady
   (:func:`.lifecycle.wait_for_pods_ready`). Each step reads the Workload as the previous one left it;
4. ClusterQueue and LocalQueue status (:func:`.queues.status_batches`);
5. pod finalizers released (:func:`.integrations.finalizer_releases`).

The manager keeps, across passes, when each Workload was admitted (waitForPodsReady counts from it)
and until when it waits to be requeued. Not modelled: preemption, fair sharing, priorities,
StrictFIFO blocking; of TAS what :mod:`.tas`, :mod:`.tas_placement`, :mod:`.tas_admission` and
:mod:`.ungater` list. MultiKueue's dispatching of a manager's Workloads to worker clusters is
:mod:`.dispatcher`'s (its check stays ``Pending`` here until it turns it ``Ready``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.autoscaler import provisioning as pr
from gang_sim.controllers.base import (
    Controller,
    Obj,
    controlled_by,
    earliest,
    owner_reference,
    set_condition,
)
from gang_sim.controllers.kueue import (
    checks,
    integrations,
    lifecycle,
    queues,
    quota,
    scheduler,
    starter,
    tas,
    ungater,
)
from gang_sim.controllers.kueue import workloads as wl
from gang_sim.controllers.kueue.lifecycle import Next
from gang_sim.controllers.kueue.patches import (
    AssumeUsage,
    Batch,
    CreateObject,
    DeleteControlled,
    DeleteObject,
    Patch,
    PatchObject,
    RecordAdmission,
    RecordEvent,
    RequeueAt,
    WorkloadStatus,
)
from gang_sim.controllers.kueue.snapshot import (
    CheckSnapshot,
    IntegrationSnapshot,
    Owner,
    QueueSnapshot,
    ReservationSnapshot,
    TopologyState,
    WorkloadSnapshot,
)


class KueueManager(Controller):
    component = "kueue-controller-manager"
    watches = frozenset(
        {
            "batch/v1/jobs",
            "v1/pods",
            wl.WORKLOADS,
            pr.PROVISIONING_REQUESTS,
            "v1/nodes",
            tas.TOPOLOGIES,
            *wl.RESOURCES.values(),
        }
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = self.plane.scenario.kueue
        self.requeue_at: dict[str, float] = {}
        self.admitted_at: dict[str, float] = {}
        self.recorded_once: set[tuple[str, ...]] = set()
        self.config = QueueSnapshot({}, {}, {}, {}, {})  # read at the start of every pass
        self.usage: quota.Usage = {}  # of the pass: reserving Workloads, and those reserved in it
        self.topology = TopologyState()  # of the pass: nodes, non-TAS pods, TAS usage as self.usage

    def reconcile(self, now: float) -> float | None:
        try:
            self.store.resolve(wl.WORKLOADS)
        except ApiError as error:
            if error.code == 404:  # the Kueue CRDs are not installed: nothing to manage
                return None
            raise
        self.config = self._queue_snapshot()
        self._apply(None, queues.check_activity(self.config))
        owners = IntegrationSnapshot(
            tuple(self.store.list(wl.WORKLOADS)[0]),
            tuple(self.store.list("batch/v1/jobs")[0]),
            tuple(self.store.view("v1/pods")),
        )
        self._apply_each(integrations.workload_creations(owners))
        workloads, _ = self.store.list(wl.WORKLOADS)
        self.usage = scheduler.reserved_usage(workloads)
        self.topology = TopologyState(
            tuple(self.store.view("v1/nodes")),
            tas.non_tas_usage(self.store.view("v1/pods")),
            scheduler.reserved_topology_usage(workloads),
        )
        wake: float | None = None
        ordered = sorted(
            workloads, key=lambda item: (item["metadata"].get("creationTimestamp", ""), item["metadata"]["name"])
        )
        for workload in ordered:
            with self.guard(workload):
                wake = earliest(wake, self._sync(workload, now))
        self._apply_each(queues.status_batches(self.config, self.store.list(wl.WORKLOADS)[0]))
        finished = integrations.finished_groups(self.store.list(wl.WORKLOADS)[0])
        self._apply_each(integrations.finalizer_releases(self.store.view("v1/pods"), finished))
        return wake

    # -- one workload --------------------------------------------------------------------------------

    def _sync(self, workload: Obj, now: float) -> float | None:
        """The steps of :mod:`.lifecycle` on one Workload; each snapshot reads it as the last step left it."""
        if lifecycle.is_over(workload):
            return None
        owner = self._owner(workload)
        self._apply(workload, lifecycle.wait_for_start(self._snapshot(workload, owner, now)).patches)
        step = lifecycle.settle(self._snapshot(workload, owner, now))
        self._apply(workload, step.patches)
        if step.next is Next.RESERVE:
            self._apply(workload, scheduler.reserve(self._reservation(workload)))
        if step.next is not Next.CHECK:
            return step.wake
        namespace = workload["metadata"]["namespace"]
        checked = checks.sync_checks(CheckSnapshot(workload, self.config, self._requests(namespace), _wall_clock()))
        self._apply(workload, checked.patches)
        step = lifecycle.judge(self._snapshot(workload, owner, now), checked.states)
        self._apply(workload, step.patches)
        if step.next is not Next.RUN:
            return step.wake
        if step.reread:
            workload = self.store.get(wl.WORKLOADS, workload["metadata"]["name"], namespace)
        self._apply(workload, starter.start(workload, self._owner(workload), self.config.flavors))
        self._apply(workload, ungater.ungate(workload, self.store.view("v1/pods", workload["metadata"]["namespace"])))
        step = lifecycle.wait_for_pods_ready(self._snapshot(workload, self._owner(workload), now))
        self._apply(workload, step.patches)
        return step.wake

    def _snapshot(self, workload: Obj, owner: Owner, now: float) -> WorkloadSnapshot:
        uid = workload["metadata"]["uid"]
        return WorkloadSnapshot(
            workload,
            owner,
            self.settings,
            now,
            _wall_clock(),
            admitted_at=self.admitted_at.get(uid),
            requeue_at=self.requeue_at.get(uid),
        )

    def _reservation(self, workload: Obj) -> ReservationSnapshot:
        namespace = self.store.get("v1/namespaces", workload["metadata"]["namespace"])
        labels = (namespace.get("metadata") or {}).get("labels") or {}
        return ReservationSnapshot(
            workload, self.config, dict(self.usage), labels, self.plane.clock.now(), _wall_clock(), self.topology
        )

    # -- reading -------------------------------------------------------------------------------------

    def _queue_snapshot(self) -> QueueSnapshot:
        def by_name(key: str) -> dict[str, Obj]:
            return {item["metadata"]["name"]: item for item in self.store.list(wl.RESOURCES[key])[0]}

        local_queues = {
            (item["metadata"]["namespace"], item["metadata"]["name"]): item
            for item in self.store.list(wl.RESOURCES["lqs"])[0]
        }
        try:
            topologies = {item["metadata"]["name"]: item for item in self.store.list(tas.TOPOLOGIES)[0]}
        except ApiError:  # Kueue's Topology CRD is not installed
            topologies = {}
        return QueueSnapshot(
            by_name("flavors"), by_name("cqs"), local_queues, by_name("acs"), by_name("prcs"), topologies
        )

    def _owner(self, workload: Obj) -> Owner:
        """The Job, or the pods (of the group, or the single owning pod), that ``workload`` stands for."""
        metadata = workload["metadata"]
        namespace = metadata["namespace"]
        if (metadata.get("annotations") or {}).get(wl.IS_GROUP) == "true":
            pods, _ = self.store.list("v1/pods", namespace, label_selector=f"{wl.GROUP_NAME}={metadata['name']}")
            return Owner(pods=tuple(pods))
        of_pod = wl.stands_for_pods(workload)
        kind, resource = ("Pod", "v1/pods") if of_pod else ("Job", "batch/v1/jobs")
        reference = next((ref for ref in metadata.get("ownerReferences") or [] if ref.get("kind") == kind), None)
        if reference is None:
            return Owner()
        try:
            found = self.store.get(resource, reference["name"], namespace)
        except ApiError:
            return Owner()
        return Owner(pods=(found,)) if of_pod else Owner(job=found)

    def _requests(self, namespace: str) -> dict[str, Obj]:
        """The namespace's ProvisioningRequests by name (none when the resource is not served)."""
        try:
            items, _ = self.store.list(pr.PROVISIONING_REQUESTS, namespace)
        except ApiError:
            return {}
        return {item["metadata"]["name"]: item for item in items}

    # -- applying ------------------------------------------------------------------------------------

    def _apply_each(self, batches: Iterable[Batch]) -> None:
        for batch in batches:
            with self.guard(batch.subject):
                self._apply(batch.subject, batch.plan())

    def _apply(self, subject: Obj | None, patches: Sequence[Patch]) -> None:
        """Apply ``patches`` in order. ``subject`` is the object they are about: the Workload a
        :class:`~.patches.WorkloadStatus` is written to (its ``status`` refreshed from the answer), the
        default object of a :class:`~.patches.RecordEvent`."""
        for patch in patches:
            if isinstance(patch, WorkloadStatus):
                self._write_status(_required(subject, patch), patch)
            elif isinstance(patch, CreateObject):
                self._create(patch)
            elif isinstance(patch, PatchObject):
                self.store.patch(
                    patch.resource,
                    patch.name,
                    patch.body,
                    namespace=patch.namespace,
                    subresource=patch.subresource,
                    patch_type=patch.patch_type,
                )
            elif isinstance(patch, DeleteObject):
                self.store.delete(patch.resource, patch.name, patch.namespace)
            elif isinstance(patch, DeleteControlled):
                owner = {"metadata": {"uid": patch.owner_uid}}
                for item in self.store.list(patch.resource, patch.namespace)[0]:
                    if controlled_by(item, owner):
                        self.store.delete(patch.resource, item["metadata"]["name"], patch.namespace)
            elif isinstance(patch, RecordEvent):
                self._record(patch.subject if patch.subject is not None else _required(subject, patch), patch)
            elif isinstance(patch, AssumeUsage):
                quota.add_usage(self.usage, patch.cluster_queue, list(patch.pod_set_assignments))
                usage = {flavor: dict(leaves) for flavor, leaves in self.topology.usage.items()}
                tas.merge_usage(usage, patch.topology_usage)
                self.topology = dataclasses.replace(self.topology, usage=usage)
            elif isinstance(patch, RecordAdmission):
                if patch.at is None:
                    self.admitted_at.pop(patch.uid, None)
                else:
                    self.admitted_at[patch.uid] = patch.at
            elif isinstance(patch, RequeueAt):
                self.requeue_at[patch.uid] = patch.at

    def _create(self, patch: CreateObject) -> None:
        try:
            created = self.store.create(patch.resource, patch.body, patch.namespace)
        except ApiError as error:
            if patch.exists_ok and error.code == 409:
                return
            raise
        for pod in patch.adopters:
            references = [*(pod["metadata"].get("ownerReferences") or []), owner_reference(created, controller=False)]
            body = {"metadata": {"ownerReferences": references}}
            self.store.patch("v1/pods", pod["metadata"]["name"], body, namespace=pod["metadata"]["namespace"])

    def _record(self, involved: Obj, patch: RecordEvent) -> None:
        if patch.once_key is not None:
            if patch.once_key in self.recorded_once:
                return
            self.recorded_once.add(patch.once_key)
        self.plane.record_event(involved, patch.reason, patch.message, warning=patch.warning, component=self.component)

    def _write_status(self, workload: Obj, patch: WorkloadStatus) -> None:
        metadata = workload["metadata"]
        status = workload.setdefault("status", {})
        current = list(status.get("conditions") or [])
        generation = {"observedGeneration": int(metadata.get("generation", 1))}
        for item in patch.conditions:
            current = set_condition(current, *item, extra=generation)
        body = {"status": {"conditions": current, **patch.fields}}
        updated = self.store.patch(
            wl.WORKLOADS, metadata["name"], body, namespace=metadata["namespace"], subresource="status"
        )
        workload["status"] = updated.get("status") or {}


def _required(subject: Obj | None, patch: Patch) -> Obj:
    if subject is None:
        raise ValueError(f"{type(patch).__name__} needs the object it is about")
    return subject


def _wall_clock() -> datetime:
    return datetime.now(timezone.utc)


def kueue_controllers() -> list[type[Controller]]:
    return [KueueManager]

"""Applying deletion plans: the object table's removal path and the garbage collector's writes.

:mod:`.garbage` decides (pure, over a read-only view); :class:`DeletingObjectTable` carries out its
plans through the table's one commit path, in plan order, so events follow upstream's order
(``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`` ``Delete``: the owner's
mark before its dependents' changes). Every removal, whoever asks for it (a delete, the last
finalizer cleared, the collector), goes through :meth:`DeletingObjectTable._remove`, which then
collects the removed object's dependents (``pkg/controller/garbagecollector/garbagecollector.go``).
:class:`.store.Store` extends it with admission and the API verbs.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from gang_sim.apiserver import garbage
from gang_sim.apiserver.object_table import ObjectTable
from gang_sim.apiserver.registry import CRD_KEY, Registry, ResourceType

Object = dict[str, Any]


class DeletingObjectTable(ObjectTable):
    """An :class:`.object_table.ObjectTable` that removes objects and collects their garbage.

    Options as the object table's, plus ``graceful_pod_deletion`` (off: pods are removed at once;
    on: a pod bound to a node is only marked until deleted with grace 0, as a real kubelet does).
    It is the :class:`.garbage.ObjectsView` its plans are made from.
    """

    def __init__(
        self,
        *,
        registry: Registry | None = None,
        history_limit: int = 10_000,
        seed: int | None = None,
        wall_clock: Callable[[], float] = time.time,
        graceful_pod_deletion: bool = False,
    ) -> None:
        super().__init__(registry=registry, history_limit=history_limit, seed=seed, wall_clock=wall_clock)
        # True: pods bound to a node stay Terminating until deleted with grace 0 (a kubelet's job).
        self.graceful_pod_deletion = graceful_pod_deletion

    def _apply_deletion(self, plan: garbage.DeletionPlan) -> Object:
        """Apply a delete request's plan; returns what the request answers (see :class:`.garbage.DeletionPlan`)."""
        for step in plan.before:
            self._apply(step)
        answer = None if plan.own is None else self._apply(plan.own)
        for step in plan.after:
            self._apply(step)
        return plan.unchanged if answer is None else answer

    def _apply(self, step: garbage.Step) -> Object | None:
        """Carry out one step: a write, or the steps a decision resolves to against the table as it is now.

        Returns the object as the step's last write left it (None: it wrote nothing).
        """
        if isinstance(step, garbage.Commit):
            return self._commit(step.resource_type, "MODIFIED", step.new, step.old)
        if isinstance(step, garbage.Remove):
            return self._remove(step.resource_type, step.last, step.old)
        written = None
        for resolved in step.resolve(self):
            written = self._apply(resolved)
        return written

    def _remove(self, resource_type: ResourceType, last: Object, old: Object | None = None) -> Object:
        """Commit the removal of a stored object and run what follows a real deletion: its pod logs
        go, its dependents are collected, and a removed CRD takes its custom resources along."""
        removed = self._commit(resource_type, "DELETED", copy.deepcopy(last), old or last)
        metadata = removed["metadata"]
        if resource_type.storage_key == "/pods":
            self.logs.forget_pod(metadata.get("namespace", ""), metadata["name"])
        dependents = self.owners.take_dependents(metadata.get("uid", ""))
        for step in garbage.plan_collection(removed, dependents):
            self._apply(step)
        if resource_type.key == CRD_KEY:
            group, plural = removed["spec"]["group"], removed["spec"]["names"]["plural"]
            storage_key = f"{group}/{plural}"
            served = self.registry.versions_of(storage_key)
            for obj in list(self._objects.get(storage_key, {}).values()):
                if served:
                    self._commit(served[0], "DELETED", copy.deepcopy(obj), obj)
            self._objects.pop(storage_key, None)
            self._indexes.pop(storage_key, None)
            self.registry.remove_storage(storage_key)
        return removed

"""Applying deletion plans: the store's removal path and the garbage collector's writes.

:mod:`.garbage` decides (pure, over a read-only :class:`.garbage.ObjectsView`); :class:`Deleter`
carries out its plans through the object table's one commit path, in plan order, so events follow
upstream's order (``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go``
``Delete``: the owner's mark before its dependents' changes). Every removal, whoever asks for it (a
delete, the last finalizer cleared, the collector), goes through :meth:`Deleter.remove`, which then
collects the removed object's dependents (``pkg/controller/garbagecollector/garbagecollector.go``).
"""

from __future__ import annotations

import copy
from typing import Any

from gang_sim.apiserver import garbage
from gang_sim.apiserver.object_table import ObjectTable
from gang_sim.apiserver.registry import CRD_KEY, ResourceType

Object = dict[str, Any]


class Deleter:
    """Removes objects from ``table`` and collects their garbage.

    ``view`` is what the plans' decisions are resolved against when a step runs (the store: the
    table's objects plus the store's deletion options, :class:`.garbage.ObjectsView`).
    """

    def __init__(self, table: ObjectTable, view: garbage.ObjectsView) -> None:
        self._table = table
        self._view = view

    def apply_plan(self, plan: garbage.DeletionPlan) -> Object:
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
            return self._table.commit(step.resource_type, "MODIFIED", step.new, step.old)
        if isinstance(step, garbage.Remove):
            return self.remove(step.resource_type, step.last, step.old)
        written = None
        for resolved in step.resolve(self._view):
            written = self._apply(resolved)
        return written

    def remove(self, resource_type: ResourceType, last: Object, old: Object | None = None) -> Object:
        """Commit the removal of a stored object (``last``: its final state, ``old``: the stored one) and
        run what follows a real deletion: its pod logs go, its dependents are collected, and a removed
        CRD takes its custom resources along. Returns the DELETED object."""
        table = self._table
        removed = table.commit(resource_type, "DELETED", copy.deepcopy(last), old or last)
        metadata = removed["metadata"]
        if resource_type.storage_key == "/pods":
            table.logs.forget_pod(metadata.get("namespace", ""), metadata["name"])
        dependents = table.owners.take_dependents(metadata.get("uid", ""))
        for step in garbage.plan_collection(removed, dependents):
            self._apply(step)
        if resource_type.key == CRD_KEY:
            group, plural = removed["spec"]["group"], removed["spec"]["names"]["plural"]
            storage_key = f"{group}/{plural}"
            served = table.registry.versions_of(storage_key)
            for obj in table.iter_objects(storage_key):
                if served:
                    table.commit(served[0], "DELETED", copy.deepcopy(obj), obj)
            table.drop_storage(storage_key)
            table.registry.remove_storage(storage_key)
        return removed

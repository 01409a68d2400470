"""Per-kind admission: defaults, validation and update rules (upstream ``rest.RESTCreateStrategy``).

A :class:`Strategy` prepares and validates an object before the store commits it. The base strategy
is what most built-in kinds need: status reset on create and kept on main-resource updates when the
kind has a ``status`` subresource, and object-metadata validation. Kind modules subclass it.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_gang.sim import validation
from airflow_provider_gang.sim.errors import Cause
from airflow_provider_gang.sim.registry import ResourceType

Object = dict[str, Any]


class Strategy:
    """Default admission for a kind. Methods mutate ``new`` (a private copy) in place."""

    def prepare_create(self, new: Object, resource_type: ResourceType) -> None:
        """Reset server-owned parts before create (status when it is a subresource)."""
        if resource_type.has_status:
            new.pop("status", None)
            initial = self.initial_status(new)
            if initial is not None:
                new["status"] = initial

    def initial_status(self, new: Object) -> dict[str, Any] | None:
        """The status a freshly created object gets (``None``: no status field)."""
        return None

    def validate_create(self, new: Object, resource_type: ResourceType, field_validation: str) -> list[Cause]:
        return validation.validate_metadata(
            new.get("metadata") or {}, resource_type.storage_key, resource_type.namespaced
        )

    def prepare_update(self, new: Object, old: Object, resource_type: ResourceType) -> None:
        """Main-resource update: ``status`` cannot change through it when a status subresource exists."""
        if resource_type.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)

    def validate_update(
        self, new: Object, old: Object, resource_type: ResourceType, field_validation: str
    ) -> list[Cause]:
        return validation.validate_metadata(
            new.get("metadata") or {}, resource_type.storage_key, resource_type.namespaced
        )

    def validate_status_update(self, new: Object, old: Object, resource_type: ResourceType) -> list[Cause]:
        return []

    def spec_changed(self, new: Object, old: Object) -> bool:
        """Whether ``metadata.generation`` is bumped: any change outside metadata and status."""
        ignored = ("metadata", "status", "apiVersion", "kind")
        return {k: v for k, v in new.items() if k not in ignored} != {k: v for k, v in old.items() if k not in ignored}

"""Per-kind admission: defaults, validation and update rules (upstream ``rest.RESTCreateStrategy``).

A :class:`Strategy` prepares and validates an object before the store commits it. The base strategy
is what most built-in kinds need: status reset on create and kept on main-resource updates when the
kind has a ``status`` subresource, and object-metadata validation. Kind modules subclass it.
"""

from __future__ import annotations

import copy
from typing import Any

from gang_sim.apiserver import validation
from gang_sim.apiserver.errors import Cause
from gang_sim.apiserver.registry import ResourceType

Object = dict[str, Any]


class Strategy:
    """Default admission for a kind. Methods mutate ``new`` (a private copy) in place.

    ``tracks_generation``: whether objects carry ``metadata.generation`` (custom resources, CRDs,
    Jobs, Pods do; ConfigMaps, Services, Nodes, Events... do not, as upstream).
    """

    tracks_generation = False

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


_METADATA_OMIT_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")
_TOP_OMIT_EMPTY = ("data", "binaryData", "stringData")
_POD_SPEC_OMIT_EMPTY = (
    "nodeSelector",
    "tolerations",
    "schedulingGates",
    "volumes",
    "initContainers",
    "imagePullSecrets",
    "readinessGates",
    "hostAliases",
    "resourceClaims",
    "topologySpreadConstraints",
)
_CONTAINER_OMIT_EMPTY = ("env", "envFrom", "ports", "volumeMounts", "args", "command")


def _drop_empty(mapping: Any, keys: tuple[str, ...]) -> None:
    if isinstance(mapping, dict):
        for key in keys:
            if key in mapping and mapping[key] in ({}, [], None):
                del mapping[key]


def _omit_empty_pod_spec(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    _drop_empty(spec, _POD_SPEC_OMIT_EMPTY)
    for kind in ("containers", "initContainers"):
        for container in spec.get(kind) or []:
            _drop_empty(container, _CONTAINER_OMIT_EMPTY)


def omit_empty(new: Object, custom: bool) -> None:
    """Drop empty maps and lists the way Go's ``omitempty`` does when the apiserver serialises.

    Metadata for every kind (``labels: {}`` is stored as absent, so ``kubectl apply`` of such a
    manifest is "unchanged" the second time, as on a real server); for built-in kinds also the
    optional map/list fields of ConfigMaps, Secrets, pod specs (pods, templates, jobs) and containers.
    Custom resources keep empty values in their own fields, like a real (unstructured) server.
    """
    _drop_empty(new.get("metadata"), _METADATA_OMIT_EMPTY)
    if custom:
        return
    _drop_empty(new, _TOP_OMIT_EMPTY)
    spec = new.get("spec")
    _omit_empty_pod_spec(spec)
    template = spec.get("template") if isinstance(spec, dict) else None
    if isinstance(template, dict):
        _drop_empty(template.get("metadata"), _METADATA_OMIT_EMPTY)
        _omit_empty_pod_spec(template.get("spec"))
    _omit_empty_pod_spec(new.get("template", {}).get("spec") if isinstance(new.get("template"), dict) else None)

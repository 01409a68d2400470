"""Admission for Namespaces, Services, Nodes and CustomResourceDefinitions."""

from __future__ import annotations

import base64
import copy
import itertools
from typing import Any

from gang_sim.apiserver import errors, validation
from gang_sim.apiserver.errors import Cause
from gang_sim.apiserver.kinds.base import Object, Strategy
from gang_sim.apiserver.registry import ResourceType


class SecretStrategy(Strategy):
    """Secrets: ``stringData`` is merged into base64 ``data`` and dropped; ``type`` defaults to Opaque."""

    def prepare_create(self, new: Object, resource_type: ResourceType) -> None:
        self.prepare_update(new, new, resource_type)

    def prepare_update(self, new: Object, old: Object, resource_type: ResourceType) -> None:
        string_data = new.pop("stringData", None) or {}
        if string_data:
            data = new.setdefault("data", {})
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
        if not new.get("type"):
            new["type"] = old.get("type") or "Opaque"


class NamespaceStrategy(Strategy):
    """Namespaces are Active at once, carry the ``kubernetes.io/metadata.name`` label (upstream)."""

    def prepare_create(self, new: Object, resource_type: ResourceType) -> None:
        super().prepare_create(new, resource_type)
        metadata = new["metadata"]
        metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata.get("name", "")
        new["spec"] = {"finalizers": ["kubernetes"]}

    def initial_status(self, new: Object) -> dict[str, Any] | None:
        return {"phase": "Active"}


class NodeStrategy(Strategy):
    """Nodes may be created with their status (upstream ``nodeStrategy`` keeps it on create)."""

    def prepare_create(self, new: Object, resource_type: ResourceType) -> None:
        return None


_CLUSTER_IPS = itertools.count(1)


class ServiceStrategy(Strategy):
    """Defaults ClusterIP type, allocates a cluster IP from 10.96.0.0/12 unless headless; IP immutable."""

    def prepare_create(self, new: Object, resource_type: ResourceType) -> None:
        super().prepare_create(new, resource_type)
        spec = new.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("clusterIP") != "None":
            number = next(_CLUSTER_IPS)
            spec["clusterIP"] = f"10.96.{(number // 254) % 256}.{number % 254 + 1}"
        spec["clusterIPs"] = [spec["clusterIP"]]
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))

    def initial_status(self, new: Object) -> dict[str, Any] | None:
        return {"loadBalancer": {}}

    def prepare_update(self, new: Object, old: Object, resource_type: ResourceType) -> None:
        super().prepare_update(new, old, resource_type)
        spec = new.setdefault("spec", {})
        for kept in ("clusterIP", "clusterIPs"):
            if kept in old.get("spec", {}) and not spec.get(kept):
                spec[kept] = copy.deepcopy(old["spec"][kept])

    def validate_update(
        self, new: Object, old: Object, resource_type: ResourceType, field_validation: str
    ) -> list[Cause]:
        causes = super().validate_update(new, old, resource_type, field_validation)
        new_spec, old_spec = new.get("spec", {}), old.get("spec", {})
        new_ips = new_spec.get("clusterIPs")
        if new_spec.get("clusterIP") != old_spec.get("clusterIP"):
            new_ips = [new_spec.get("clusterIP")]  # upstream derives clusterIPs from a changed clusterIP
        if new_ips != old_spec.get("clusterIPs"):
            shown = "[]string{" + ", ".join(f'"{ip}"' for ip in new_ips or []) + "}"
            causes.append(
                errors.field_cause(
                    "FieldValueInvalid", "spec.clusterIPs[0]", f"Invalid value: {shown}: may not change once set"
                )
            )
        return causes


class CustomResourceDefinitionStrategy(Strategy):
    """CRDs must be named ``<plural>.<group>`` and are Established at once (no controller delay)."""

    tracks_generation = True

    def initial_status(self, new: Object) -> dict[str, Any] | None:
        spec = new.get("spec") or {}
        storage = [v.get("name") for v in spec.get("versions") or [] if v.get("storage")]
        conditions = [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found"},
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ]
        return {
            "acceptedNames": copy.deepcopy(spec.get("names") or {}),
            "conditions": conditions,
            "storedVersions": storage,
        }

    def _spec_causes(self, new: Object) -> list[Cause]:
        causes: list[Cause] = []
        spec = new.get("spec") or {}
        names = spec.get("names") or {}
        for required in ("plural", "kind"):
            if not names.get(required):
                causes.append(validation.required(f"spec.names.{required}"))
        if not spec.get("group"):
            causes.append(validation.required("spec.group"))
        expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
        if new["metadata"].get("name") != expected:
            causes.append(
                validation.invalid_value(
                    "metadata.name", new["metadata"].get("name", ""), 'must be spec.names.plural+"."+spec.group'
                )
            )
        versions = spec.get("versions") or []
        if not versions:
            causes.append(
                validation.required("spec.versions", "must have exactly one version marked as storage version")
            )
        elif sum(1 for v in versions if v.get("storage")) != 1:
            causes.append(
                validation.invalid_value(
                    "spec.versions", "array", "must have exactly one version marked as storage version"
                )
            )
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append(validation.required("spec.scope"))
        return causes

    def validate_create(self, new: Object, resource_type: ResourceType, field_validation: str) -> list[Cause]:
        return super().validate_create(new, resource_type, field_validation) + self._spec_causes(new)

    def validate_update(
        self, new: Object, old: Object, resource_type: ResourceType, field_validation: str
    ) -> list[Cause]:
        return super().validate_update(new, old, resource_type, field_validation) + self._spec_causes(new)

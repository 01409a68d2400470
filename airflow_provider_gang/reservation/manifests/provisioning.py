"""PodTemplate and ProvisioningRequest (``autoscaling.x-k8s.io/v1``).

Create the PodTemplate **before** the request: CA marks a request whose template is missing
``Failed/FailedToCreatePods`` (kueue#3957). The request's spec is immutable (CEL), which is why
every try has a new name (:mod:`reservation.naming`).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common, pods
from airflow_provider_gang.reservation.spec import GangSpec

PROVISIONING_API_VERSION = "autoscaling.x-k8s.io/v1"


def pod_template(spec: GangSpec, *, owner_uid: str) -> dict[str, Any]:
    """The core/v1 PodTemplate the ProvisioningRequest references: the shared member template."""
    names = naming.GangNames(spec.name)
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": common.metadata(spec, names.pod_template, common.ROLE_RESERVATION, owner_uid),
        "template": pods.member_template(spec),
    }


def provisioning_request(spec: GangSpec, *, owner_uid: str) -> dict[str, Any]:
    """One podSet of ``size`` copies of the PodTemplate, with the spec's class and parameters."""
    if not spec.mode.uses_provisioning_request:
        raise ValueError(f"mode {spec.mode.value!r} does not use a ProvisioningRequest")
    names = naming.GangNames(spec.name)
    body: dict[str, Any] = {
        "provisioningClassName": spec.provisioning_class,
        "podSets": [{"podTemplateRef": {"name": names.pod_template}, "count": spec.size}],
    }
    if spec.provisioning_parameters:
        body["parameters"] = dict(spec.provisioning_parameters)
    return {
        "apiVersion": PROVISIONING_API_VERSION,
        "kind": "ProvisioningRequest",
        "metadata": common.metadata(spec, names.provisioning_request, common.ROLE_RESERVATION, owner_uid),
        "spec": body,
    }

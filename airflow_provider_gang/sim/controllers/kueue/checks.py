"""Kueue's ProvisioningRequest admission-check controller (reference 2.6, 7.C).

For a workload with ``QuotaReserved=True`` and a check whose AdmissionCheck has
``controllerName: kueue.x-k8s.io/provisioning-request``:

1. PodTemplates ``ppt-<request>-<podSet>`` are created first (owned by the Workload), from the podSet
   template merged with the assigned flavor's ``nodeLabels`` and ``tolerations``; then the request
   ``<workload>-<check>-<attempt>`` (attempt = ``retryCount + 1``), owned by the Workload, labelled
   ``kueue.x-k8s.io/managed``, class and parameters from the ProvisioningRequestConfig plus the
   workload's ``provreq.kueue.x-k8s.io/`` annotations, counts from ``podSetAssignments``.
2. Request conditions map to the check state (precedence Failed > CapacityRevoked > BookingExpired >
   Provisioned > Accepted): Failed -> Retry while ``attempt <= backoffLimitCount`` (message "Retrying
   after failure: ...", ``requeueAfterSeconds = base * 2^(attempt-1)`` capped) else Rejected;
   CapacityRevoked -> Rejected; BookingExpired before admission -> as Failed, after admission ignored;
   Provisioned -> Ready with ``podSetUpdates`` carrying the two consume annotations and the configured
   ``nodeSelector`` from ``provisioningClassDetails``; Accepted -> Pending with the Provisioned message.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.sim.controllers.autoscaler import provisioning as pr
from airflow_provider_gang.sim.controllers.base import Obj, owner_reference
from airflow_provider_gang.sim.controllers.kueue.workloads import PROVREQ_PREFIX

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
MAX_REQUEST_NAME = 253


def request_name(workload: str, check: str, attempt: int) -> str:
    name = f"{workload}-{check}-{attempt}"
    if len(name) <= MAX_REQUEST_NAME - 6:
        return name
    return f"{name[:247]}-{hashlib.sha1(name.encode()).hexdigest()[:5]}"


def template_name(request: str, pod_set: str) -> str:
    return f"ppt-{request}-{pod_set}"


def retry_strategy(config: Mapping[str, Any]) -> tuple[int, float, float]:
    strategy = (config.get("spec") or {}).get("retryStrategy") or {}
    return (
        int(strategy.get("backoffLimitCount", 3)),
        float(strategy.get("backoffBaseSeconds", 60)),
        float(strategy.get("backoffMaxSeconds", 1800)),
    )


def _condition(request: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for item in (request.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind and item.get("status") == "True":
            return dict(item)
    return None


def check_state(
    request: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    attempt: int,
    *,
    admitted: bool,
    pod_set_names: list[str],
) -> dict[str, Any]:
    """The admission check entry (``state``, ``message`` and, as applicable, retry or podSetUpdates)."""
    if request is None:
        return {"state": "Pending", "message": ""}
    limit, base, maximum = retry_strategy(config)

    def retry_or_reject(message: str) -> dict[str, Any]:
        if attempt <= limit:
            return {
                "state": "Retry",
                "message": f"Retrying after failure: {message}",
                "retryCount": attempt,
                "requeueAfterSeconds": int(min(maximum, base * 2 ** (attempt - 1))),
            }
        return {"state": "Rejected", "message": message}

    failed = _condition(request, "Failed")
    if failed is not None:
        return retry_or_reject(str(failed.get("message", "")))
    revoked = _condition(request, "CapacityRevoked")
    if revoked is not None:
        return {"state": "Rejected", "message": str(revoked.get("message", ""))}
    expired = _condition(request, "BookingExpired")
    provisioned = _condition(request, "Provisioned")
    if expired is not None and not admitted:
        return retry_or_reject(str(expired.get("message", "")))
    if provisioned is not None:
        metadata = request["metadata"]
        class_name = request["spec"]["provisioningClassName"]
        details = (request.get("status") or {}).get("provisioningClassDetails") or {}
        node_selector = {
            item["key"]: details[item["valueFromProvisioningClassDetail"]]
            for item in ((config.get("spec") or {}).get("podSetUpdates") or {}).get("nodeSelector") or []
            if item.get("valueFromProvisioningClassDetail") in details
        }
        updates = []
        for name in pod_set_names:
            update: dict[str, Any] = {
                "name": name,
                "annotations": {
                    pr.CONSUME_ANNOTATIONS[0]: metadata["name"],
                    "autoscaling.x-k8s.io/provisioning-class-name": class_name,
                },
            }
            if node_selector:
                update["nodeSelector"] = node_selector
            updates.append(update)
        return {"state": "Ready", "message": str(provisioned.get("message", "")), "podSetUpdates": updates}
    if _condition(request, "Accepted") is not None:
        for item in (request.get("status") or {}).get("conditions") or []:
            if item.get("type") == "Provisioned":
                return {"state": "Pending", "message": str(item.get("message", ""))}
    return {"state": "Pending", "message": ""}


def pod_template(workload: Obj, pod_set: Mapping[str, Any], flavor: Mapping[str, Any] | None, name: str) -> Obj:
    template = copy.deepcopy(pod_set.get("template") or {})
    spec = template.setdefault("spec", {})
    if flavor is not None:
        flavor_spec = flavor.get("spec") or {}
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **(flavor_spec.get("nodeLabels") or {})}
        spec["tolerations"] = list(spec.get("tolerations") or []) + list(flavor_spec.get("tolerations") or [])
    for container in spec.get("containers") or []:
        resources = container.setdefault("resources", {})
        requests = resources.setdefault("requests", {})
        for resource, amount in (resources.get("limits") or {}).items():
            requests.setdefault(resource, amount)
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": _managed_metadata(workload, name),
        "template": template,
    }


def provisioning_request(workload: Obj, config: Mapping[str, Any], name: str, counts: Mapping[str, int]) -> Obj:
    parameters = dict((config.get("spec") or {}).get("parameters") or {})
    for key, value in (workload["metadata"].get("annotations") or {}).items():
        if key.startswith(PROVREQ_PREFIX):
            parameters[key[len(PROVREQ_PREFIX) :]] = value
    spec: dict[str, Any] = {
        "provisioningClassName": (config.get("spec") or {}).get("provisioningClassName"),
        "podSets": [
            {"podTemplateRef": {"name": template_name(name, pod_set)}, "count": count}
            for pod_set, count in counts.items()
        ],
    }
    if parameters:
        spec["parameters"] = parameters
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": _managed_metadata(workload, name),
        "spec": spec,
    }


def _managed_metadata(workload: Obj, name: str) -> Obj:
    """Metadata of an object Kueue creates for ``workload``'s check: ``managed`` label, owned by it."""
    return {
        "name": name,
        "namespace": workload["metadata"]["namespace"],
        "labels": {"kueue.x-k8s.io/managed": "true"},
        "ownerReferences": [owner_reference(workload)],
    }

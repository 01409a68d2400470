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

:func:`sync_checks` is the controller's pass over one Workload (kubernetes-sigs/kueue
``pkg/controller/admissionchecks/provisioning/controller.go``): it reads a
:class:`~.snapshot.CheckSnapshot` and returns the objects to create and the status to write
(:mod:`.patches`), with the check states the workload controller goes on with. A change that turns
a check Rejected or Retry on an admitted Workload sets ``Admitted=False`` in the same write: check
states outrank ``Admitted`` (Kueue 0.19.3, kubernetes-sigs/kueue#14871).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gang_sim.controllers.autoscaler import provisioning as pr
from gang_sim.controllers.base import Obj, is_true, owner_reference
from gang_sim.controllers.kueue import workloads as wl
from gang_sim.controllers.kueue.patches import Condition, CreateObject, Patch, WorkloadStatus
from gang_sim.controllers.kueue.snapshot import CheckSnapshot, timestamp

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
MAX_REQUEST_NAME = 253
UNSATISFIED_CHECKS = "The workload has not all admission checks ready"


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
        if key.startswith(wl.PROVREQ_PREFIX):
            parameters[key[len(wl.PROVREQ_PREFIX) :]] = value
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


@dataclass(frozen=True)
class CheckResult:
    """What :func:`sync_checks` decided: ``patches`` to apply and every check entry's new ``states``."""

    patches: list[Patch]
    states: list[dict[str, Any]]


def sync_checks(snapshot: CheckSnapshot) -> CheckResult:
    """Advance the Workload's ProvisioningRequest checks (Retry and Rejected entries stay as they are).

    A Ready check whose request turns Pending after admission (BookingExpired) stays Ready.
    ``lastTransitionTime`` changes only with ``state``.
    """
    workload, config = snapshot.workload, snapshot.queues
    entries = list((workload.get("status") or {}).get("admissionChecks") or [])
    admitted = is_true(workload, "Admitted")
    patches: list[Patch] = []
    changed = False
    for index, entry in enumerate(entries):
        check = config.admission_checks.get(entry["name"])
        if check is None or (check.get("spec") or {}).get("controllerName") != PROVISIONING_CONTROLLER:
            continue
        if entry["state"] in ("Retry", "Rejected"):
            continue
        parameters = (check.get("spec") or {}).get("parameters") or {}
        check_config = config.provisioning_configs.get(parameters.get("name", ""))
        if check_config is None:
            continue
        state = _provisioning_state(snapshot, entry, check_config, patches)
        new = {**{k: v for k, v in entry.items() if k not in ("podSetUpdates", "requeueAfterSeconds")}, **state}
        if entry["state"] == "Ready" and admitted and state["state"] == "Pending":
            continue  # BookingExpired after admission is ignored
        if {k: v for k, v in new.items() if k != "lastTransitionTime"} != {
            k: v for k, v in entry.items() if k != "lastTransitionTime"
        }:
            if new["state"] != entry["state"]:
                new["lastTransitionTime"] = timestamp(snapshot.wall_clock)
            entries[index] = new
            changed = True
    if changed:
        failing = admitted and any(entry["state"] in ("Rejected", "Retry") for entry in entries)
        unadmitted = (Condition("Admitted", "False", "UnsatisfiedAdmissionChecks", UNSATISFIED_CHECKS),)
        patches.append(WorkloadStatus(unadmitted if failing else (), {"admissionChecks": entries}))
    return CheckResult(patches, entries)


def _provisioning_state(
    snapshot: CheckSnapshot, entry: Mapping[str, Any], config: Mapping[str, Any], patches: list[Patch]
) -> dict[str, Any]:
    """The check's state from its current attempt's request; a missing request is created (its
    PodTemplates first, appended to ``patches``) and the check is Pending."""
    workload = snapshot.workload
    attempt = int(entry.get("retryCount", 0)) + 1
    name = request_name(workload["metadata"]["name"], entry["name"], attempt)
    namespace = workload["metadata"]["namespace"]
    managed = set((config.get("spec") or {}).get("managedResources") or [])
    pod_sets = workload["spec"]["podSets"]
    if managed:
        wanted = [item for item in pod_sets if managed & set(_requested_resources(item))]
        if not wanted:
            return {"state": "Ready", "message": "the provisioning request is not needed"}
        pod_sets = wanted
    request = snapshot.requests.get(name)
    if request is None:
        counts = {}
        for item in pod_sets:
            assignment = wl.pod_set_assignment(workload, item["name"])
            flavor = wl.assigned_flavor(assignment, snapshot.queues.flavors)
            template = pod_template(workload, item, flavor, template_name(name, item["name"]))
            patches.append(CreateObject("v1/podtemplates", namespace, template, exists_ok=True))
            counts[item["name"]] = int(assignment.get("count", item.get("count", 1)))
        request_body = provisioning_request(workload, config, name, counts)
        patches.append(CreateObject(pr.PROVISIONING_REQUESTS, namespace, request_body))
        return {"state": "Pending", "message": ""}
    return check_state(
        request,
        config,
        attempt,
        admitted=is_true(workload, "Admitted"),
        pod_set_names=[item["name"] for item in pod_sets],
    )


def _requested_resources(pod_set: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for container in ((pod_set.get("template") or {}).get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        names += list((resources.get("requests") or {}).keys()) + list((resources.get("limits") or {}).keys())
    return names

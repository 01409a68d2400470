"""ClusterQueue and LocalQueue status, as Kueue's queue controllers report it (reference 2.3, 2.4).

``status.pendingWorkloads`` / ``reservingWorkloads`` / ``admittedWorkloads`` (what ``kubectl get cq``
and ``kubectl get lq`` print) and the ``Active`` condition: a ClusterQueue is inactive when a
referenced ResourceFlavor or AdmissionCheck is missing (reasons ``FlavorNotFound``,
``AdmissionCheckNotFound``) or a TAS flavor's Topology is (``TopologyNotFound``); a LocalQueue is
inactive when its ClusterQueue is missing (``ClusterQueueDoesNotExist``). ProvisioningRequest
AdmissionChecks get ``Active=True/Active``, or ``Active=False/BadParametersRef`` when their
ProvisioningRequestConfig is missing.

Pure: :func:`status_batches` and :func:`check_activity` read a :class:`~.snapshot.QueueSnapshot`
and return the status patches (:mod:`.patches`), as kubernetes-sigs/kueue's
``pkg/controller/core/clusterqueue_controller.go`` and ``localqueue_controller.go`` update queue
status from the cache, and ``pkg/controller/admissionchecks/provisioning/admissioncheck_reconciler.go``
the ProvisioningRequest AdmissionChecks' ``Active``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from gang_sim.controllers.base import Obj, condition, is_true, same_conditions, set_condition
from gang_sim.controllers.kueue import checks, tas
from gang_sim.controllers.kueue import workloads as wl
from gang_sim.controllers.kueue.patches import Batch, Patch, PatchObject
from gang_sim.controllers.kueue.snapshot import QueueSnapshot

Counts = dict[str, int]


def admission_check_names(queue: Obj) -> list[str]:
    """Admission checks of a ClusterQueue: v1beta2 ``admissionChecksStrategy`` or the v1beta1 list.

    The emulator keeps one stored object for both served versions (no conversion webhook), so a
    ClusterQueue written as v1beta1 still carries ``spec.admissionChecks`` and ``spec.cohort``.
    """
    spec = queue.get("spec") or {}
    names = [item["name"] for item in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []]
    return names + [name for name in spec.get("admissionChecks") or [] if name not in names]


def namespace_selected(queue: Obj, namespace_labels: Mapping[str, str]) -> bool:
    """``spec.namespaceSelector`` as a LabelSelector: null selects no namespace, ``{}`` every one."""
    selector = (queue.get("spec") or {}).get("namespaceSelector")
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if namespace_labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key", ""), expression.get("operator"), expression.get("values") or []
        present = key in namespace_labels
        matched = {
            "In": present and namespace_labels.get(key) in values,
            "NotIn": not present or namespace_labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(str(operator), False)
        if not matched:
            return False
    return True


def cohort_of(queue: Obj) -> str | None:
    spec = queue.get("spec") or {}
    return spec.get("cohortName") or spec.get("cohort") or None


def cluster_queue_activity(
    queue: Obj, flavors: Mapping[str, Obj], checks: Mapping[str, Obj], topologies: Mapping[str, Obj]
) -> tuple[str, str, str]:
    """``(status, reason, message)`` of the ClusterQueue's ``Active`` condition
    (``pkg/cache/scheduler/clusterqueue.go`` ``inactiveReason``; the first reason only)."""
    spec = queue.get("spec") or {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            if flavor.get("name") not in flavors:
                return (
                    "False",
                    "FlavorNotFound",
                    f"Can't admit new workloads: references missing ResourceFlavor(s): {flavor.get('name')}",
                )
    for name in admission_check_names(queue):
        if name not in checks:
            return (
                "False",
                "AdmissionCheckNotFound",
                f"Can't admit new workloads: references missing AdmissionCheck(s): {name}",
            )
    for topology, flavor in tas.missing_topology(queue, flavors, topologies):
        message = f'Can\'t admit new workloads: there is no Topology "{topology}" for TAS flavor "{flavor}".'
        return ("False", "TopologyNotFound", message)
    return ("True", "Ready", "Can admit new workloads")


def workload_counts(
    workloads: list[Obj], queue_of: Mapping[tuple[str, str], str]
) -> tuple[dict[str, Counts], dict[tuple[str, str], Counts]]:
    """Counts per ClusterQueue name and per (namespace, LocalQueue name)."""
    by_cluster_queue: dict[str, Counts] = {}
    by_local_queue: dict[tuple[str, str], Counts] = {}
    for workload in workloads:
        if is_true(workload, "Finished") or (workload.get("spec") or {}).get("active") is False:
            continue
        local = (workload["metadata"]["namespace"], (workload.get("spec") or {}).get("queueName", ""))
        kind = (
            "admittedWorkloads"
            if is_true(workload, "Admitted")
            else ("reservingWorkloads" if is_true(workload, "QuotaReserved") else "pendingWorkloads")
        )
        targets = [by_local_queue.setdefault(local, {})]
        if local in queue_of:
            targets.append(by_cluster_queue.setdefault(queue_of[local], {}))
        for counts in targets:
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "admittedWorkloads":
                counts["reservingWorkloads"] = counts.get("reservingWorkloads", 0) + 1
    return by_cluster_queue, by_local_queue


def status_patch(obj: Obj, counts: Counts, active: tuple[str, str, str]) -> dict[str, Any] | None:
    """The status to write, or None when nothing changed."""
    status = obj.get("status") or {}
    wanted = {key: counts.get(key, 0) for key in ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads")}
    conditions = list(status.get("conditions") or [])
    updated = set_condition(conditions, "Active", *active)
    if same_conditions(conditions, updated) and all(status.get(key) == value for key, value in wanted.items()):
        return None
    return {**wanted, "conditions": updated}


def status_batches(config: QueueSnapshot, workloads: list[Obj]) -> list[Batch]:
    """Every ClusterQueue's and LocalQueue's status write (counts and ``Active``), when it changed."""
    queue_of = {key: (item.get("spec") or {}).get("clusterQueue", "") for key, item in config.local_queues.items()}
    by_cluster_queue, by_local_queue = workload_counts(workloads, queue_of)
    batches = [
        Batch(queue, partial(_cluster_queue_status, config, name, queue, by_cluster_queue.get(name, {})))
        for name, queue in config.cluster_queues.items()
    ]
    for key, local_queue in config.local_queues.items():
        counts = by_local_queue.get(key, {})
        plan = partial(_local_queue_status, config, key, queue_of[key], local_queue, counts)
        batches.append(Batch(local_queue, plan))
    return batches


def _cluster_queue_status(config: QueueSnapshot, name: str, queue: Obj, counts: Counts) -> list[Patch]:
    active = cluster_queue_activity(queue, config.flavors, config.admission_checks, config.topologies)
    patch = status_patch(queue, counts, active)
    return [] if patch is None else [PatchObject(wl.RESOURCES["cqs"], name, {"status": patch}, subresource="status")]


def _local_queue_status(
    config: QueueSnapshot, key: tuple[str, str], target: str, queue: Obj, counts: Counts
) -> list[Patch]:
    namespace, name = key
    active = (
        ("True", "Ready", "Can submit new workloads to localQueue")
        if target in config.cluster_queues
        else ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
    )
    patch = status_patch(queue, counts, active)
    if patch is None:
        return []
    return [PatchObject(wl.RESOURCES["lqs"], name, {"status": patch}, namespace=namespace, subresource="status")]


def check_activity(config: QueueSnapshot) -> list[Patch]:
    """``Active`` on ProvisioningRequest AdmissionChecks: False/BadParametersRef when the config is missing."""
    patches: list[Patch] = []
    for name, check in config.admission_checks.items():
        spec = check.get("spec") or {}
        parameters = spec.get("parameters") or {}
        if spec.get("controllerName") != checks.PROVISIONING_CONTROLLER:
            continue
        if parameters.get("name") in config.provisioning_configs:
            wanted = ("True", "Active", "The admission check is active")
        else:
            wanted = (
                "False",
                "BadParametersRef",
                f"Cannot get ProvisioningRequestConfig {parameters.get('name')!r}",
            )
        current = condition(check, "Active")
        if current is None or (current.get("status"), current.get("reason")) != wanted[:2]:
            conditions = set_condition(list((check.get("status") or {}).get("conditions") or []), "Active", *wanted)
            body = {"status": {"conditions": conditions}}
            patches.append(PatchObject(wl.RESOURCES["acs"], name, body, subresource="status"))
    return patches

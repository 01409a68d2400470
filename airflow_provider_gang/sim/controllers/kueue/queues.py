"""ClusterQueue and LocalQueue status, as Kueue's queue controllers report it (reference 2.3, 2.4).

``status.pendingWorkloads`` / ``reservingWorkloads`` / ``admittedWorkloads`` (what ``kubectl get cq``
and ``kubectl get lq`` print) and the ``Active`` condition: a ClusterQueue is inactive when a
referenced ResourceFlavor or AdmissionCheck is missing (reasons ``FlavorNotFound``,
``AdmissionCheckNotFound``); a LocalQueue is inactive when its ClusterQueue is missing
(``ClusterQueueDoesNotExist``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.sim.controllers.base import Obj, is_true, same_conditions, set_condition

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


def cluster_queue_activity(queue: Obj, flavors: Mapping[str, Obj], checks: Mapping[str, Obj]) -> tuple[str, str, str]:
    """``(status, reason, message)`` of the ClusterQueue's ``Active`` condition."""
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

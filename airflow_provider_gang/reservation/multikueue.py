"""Kueue's MultiKueue, as the provider sees it: does a queue dispatch to worker clusters, which worker
admitted a Workload, and which Airflow connection reaches that worker. Pure.

MultiKueue (Kueue KEP-693, https://kueue.sigs.k8s.io/docs/concepts/multikueue/) runs a gang in two
places. On the *manager* cluster a ClusterQueue has an admission check whose AdmissionCheck names
the controller :data:`CONTROLLER` (``spec.controllerName``) and a MultiKueueConfig listing the
worker clusters (MultiKueueCluster objects, each with a kubeconfig Secret). A Job created there with
``spec.managedBy: kueue.x-k8s.io/multikueue`` (:data:`MANAGED_BY`) is never run by the manager's Job
controller: once the manager's quota is reserved, Kueue copies the Workload to every worker, keeps
the first whose own Kueue admits it, removes the others, creates the Job there (same name and
namespace, labels and annotations, no owner references, ``managedBy`` cleared) and marks the check
``Ready`` with ``status.clusterName`` set to that worker. From then on it mirrors the worker Job's
status onto the manager's Job, finishes the manager's Workload when the worker's finishes, and
deletes the worker's Job and Workload when the manager's Workload finishes, loses its quota or is
deleted (Kueue v0.17.0 ``pkg/controller/admissionchecks/multikueue/workload.go``,
``pkg/controller/jobs/job/job_multikueue_adapter.go``).

So the member pods exist on the worker only. The provider follows them there through the Airflow
connection an operator maps to the worker's MultiKueueCluster name (``multikueue_connections``);
without one it follows the manager's mirrored Job status (:mod:`.job_status`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from airflow_provider_gang.reservation.conditions import Object
from airflow_provider_gang.reservation.spec import GangSpec

CONTROLLER = "kueue.x-k8s.io/multikueue"
"""``AdmissionCheck.spec.controllerName`` of MultiKueue's admission checks (``kueue.MultiKueueControllerName``)."""
MANAGED_BY = "kueue.x-k8s.io/multikueue"
"""``spec.managedBy`` a Job on a MultiKueue manager must carry (Kueue rejects the check otherwise:
"The owner is not managed by Kueue: Expecting spec.managedBy to be ...")."""
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
"""Label Kueue puts on the worker's copy of the Job, naming the Workload it copied there."""

_CLUSTER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""A MultiKueueCluster is cluster-scoped and named as any object: a DNS-1123 subdomain."""


def admission_check_names(cluster_queue: Object | None) -> list[str]:
    """The admission checks a ClusterQueue applies, in order: ``spec.admissionChecksStrategy.
    admissionChecks[].name`` (v1beta2) and, as v1beta1 spelled it, ``spec.admissionChecks``."""
    spec = (cluster_queue or {}).get("spec") or {}
    names: dict[str, None] = {}
    strategy = spec.get("admissionChecksStrategy") or {}
    for rule in strategy.get("admissionChecks") or []:
        if isinstance(rule, Mapping) and isinstance(rule.get("name"), str):
            names[rule["name"]] = None
    for name in spec.get("admissionChecks") or []:
        if isinstance(name, str):
            names[name] = None
    return list(names)


def is_multikueue_check(admission_check: Object | None) -> bool:
    """Whether an AdmissionCheck is MultiKueue's (``spec.controllerName``)."""
    return ((admission_check or {}).get("spec") or {}).get("controllerName") == CONTROLLER


def dispatching_check(cluster_queue: Object | None, admission_checks: Mapping[str, Object]) -> str | None:
    """The name of the MultiKueue admission check of ``cluster_queue``, or ``None`` when the queue runs
    its Workloads itself. ``admission_checks``: the AdmissionChecks by name (one missing is not
    MultiKueue's: Kueue keeps such a ClusterQueue inactive, and the precheck says so)."""
    for name in admission_check_names(cluster_queue):
        if is_multikueue_check(admission_checks.get(name)):
            return name
    return None


def worker_cluster(workload: Object | None) -> str | None:
    """The MultiKueueCluster that admitted ``workload`` (the manager's copy): ``status.clusterName``,
    which Kueue sets, immutable, when the MultiKueue check turns ``Ready``; ``None`` before."""
    name = ((workload or {}).get("status") or {}).get("clusterName")
    return name if isinstance(name, str) and name else None


def connection_for(worker: str, connections: Mapping[str, str]) -> str | None:
    """The Airflow connection mapped to MultiKueueCluster ``worker``, or ``None`` (not mapped)."""
    return connections.get(worker) or None


class ConnectionsError(ValueError):
    """A ``multikueue_connections`` value that is not a mapping of cluster names to connection ids."""


def parse_connections(value: Any) -> dict[str, str]:
    """``multikueue_connections`` as a ``{MultiKueueCluster name: Airflow connection id}`` dict.

    Takes a mapping, a JSON object text (the provider's configuration option) or ``None`` / ``""``
    (no mapping). Raises :class:`ConnectionsError` naming the first key or value that is not a
    cluster name or a non-empty connection id."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise ConnectionsError(f"is not a JSON object ({error})") from error
    if not isinstance(value, Mapping):
        raise ConnectionsError(f"must map MultiKueueCluster names to connection ids, got {value!r}")
    parsed: dict[str, str] = {}
    for cluster, conn_id in value.items():
        if not isinstance(cluster, str) or not _CLUSTER_NAME.match(cluster) or len(cluster) > 253:
            raise ConnectionsError(f"key {cluster!r} is not a MultiKueueCluster name (a DNS-1123 subdomain)")
        if not isinstance(conn_id, str) or not conn_id.strip():
            raise ConnectionsError(f"cluster {cluster!r} maps to {conn_id!r}, not a connection id")
        parsed[cluster] = conn_id
    return parsed


def unmapped(clusters: Sequence[str], connections: Mapping[str, str]) -> list[str]:
    """The worker clusters of a MultiKueueConfig that no connection is mapped to, in order."""
    return [cluster for cluster in clusters if cluster not in connections]


def config_clusters(config: Object | None) -> list[str]:
    """``spec.clusters`` of a MultiKueueConfig (the MultiKueueCluster names), strings only."""
    clusters = ((config or {}).get("spec") or {}).get("clusters") or []
    return [name for name in clusters if isinstance(name, str)]


def not_seen_note(worker: str) -> str:
    """What cannot be seen of a gang on a worker without a mapped connection (the log and the UI say it)."""
    return (
        f"MultiKueue worker {worker!r} has no connection in multikueue_connections: the gang is followed "
        "through the manager's mirror of its Job status only - no rank logs, no member detail, no exit codes"
    )


def dispatched_spec(spec: GangSpec) -> GangSpec:
    """``spec`` as a gang goes through MultiKueue: always at its full size, without Kueue partial
    admission (``min_size`` stays the floor of later ``ShrinkTo`` steps, which plan from the operator's
    arguments). Partial admission would need the members' world ConfigMap (``manifests.world``) on the
    worker with the worker's admitted count, which the manager does not report, and a worker without a
    mapped connection could never get it; so the Job asks for exactly ``size`` members."""
    return spec if spec.floor >= spec.size else replace(spec, min_size=None)


def full_size_note(spec: GangSpec) -> str:
    """What the task log says when :func:`dispatched_spec` dropped a partial admission."""
    return (
        f"min_size={spec.floor} < size={spec.size} asks for Kueue partial admission, which is not used through "
        f"MultiKueue: the Job asks for all {spec.size} members (min_size still bounds ShrinkTo)"
    )

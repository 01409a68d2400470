"""The cluster reads and writes of a gang queued on a Kueue MultiKueue manager (``reservation.multikueue``).

- :func:`dispatching_check`, on the manager (the precheck): the MultiKueue admission check of the
  gang's ClusterQueue, read from its AdmissionChecks (cluster-scoped, hence the kueue mode's
  ClusterRole grants ``get admissionchecks``).
- :func:`admitted_worker`, on the manager once the reservation is granted: the worker cluster that
  admitted the gang (its Workload's ``status.clusterName``).
- :func:`prepare_worker`, on the worker through its mapped connection: the uid of Kueue's copy of
  the Job there, and the rendezvous Service the members resolve rank 0 through, owned by that Job
  (``reservation.manifests.service.worker_headless_service``), so MultiKueue's deletion of the Job
  takes it along. Kueue copies only the Job; the members of a ``distributed`` gang start at once and
  retry rank 0's address until the Service is there (torch's TCPStore client and JAX's coordinator
  client retry connecting within their timeouts).

Errors are the client's (``kube.errors``); the operator's guard ends the try with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.hooks import creation
from airflow_provider_gang.hooks.inspection import KUEUE_JOB_UID_LABEL
from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import ADMISSION_CHECKS, JOBS, SERVICES, WORKLOADS
from airflow_provider_gang.reservation import manifests, multikueue, naming
from airflow_provider_gang.reservation.spec import GangSpec


async def dispatching_check(client: KubeClient, cluster_queue: Mapping[str, Any] | None) -> str | None:
    """The name of ``cluster_queue``'s MultiKueue admission check, or ``None`` (one GET per check it
    names; a check that does not exist is not MultiKueue's)."""
    checks: dict[str, Mapping[str, Any]] = {}
    for name in multikueue.admission_check_names(cluster_queue):
        try:
            checks[name] = await client.get(ADMISSION_CHECKS, name)
        except errors.NotFound:
            continue
    return multikueue.dispatching_check(cluster_queue, checks)


async def admitted_worker(client: KubeClient, spec: GangSpec, job_uid: str) -> str | None:
    """The MultiKueueCluster that admitted the Workload of the gang's Job (uid ``job_uid``) on the
    manager, or ``None`` when no Workload of it names one (evicted since, or not admitted)."""
    items, _ = await client.list(WORKLOADS, spec.namespace, label_selector=f"{KUEUE_JOB_UID_LABEL}={job_uid}")
    newest = max(items, key=lambda item: str((item.get("metadata") or {}).get("creationTimestamp") or ""), default=None)
    return multikueue.worker_cluster(newest)


async def prepare_worker(client: KubeClient, spec: GangSpec) -> str | None:
    """On the worker: the uid of Kueue's copy of the gang's Job, after making sure a ``distributed``
    gang's rendezvous Service exists there, owned by it; ``None`` when the Job is not on the worker
    (MultiKueue removed it since: the reservation is gone)."""
    try:
        job = await client.get(JOBS, naming.GangNames(spec.name).job, spec.namespace)
    except errors.NotFound:
        return None
    job_uid = str(job["metadata"]["uid"])
    if spec.distributed is not None:
        service = manifests.service.worker_headless_service(spec, job_uid=job_uid)
        await creation.create_or_adopt(client, SERVICES, service, spec.namespace)
    return job_uid

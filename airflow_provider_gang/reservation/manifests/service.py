"""The headless Service that makes rank 0 addressable for rendezvous.

With ``clusterIP: None`` and members carrying ``hostname`` + ``subdomain: <service>``, each member
resolves as ``<hostname>.<service>.<namespace>.svc``. ``publishNotReadyAddresses`` publishes members
before they are Ready: rendezvous happens before any readiness probe could pass.

On a Kueue MultiKueue worker (``reservation.multikueue``) the gang has no owner ConfigMap - Kueue
copies only the Job there - so the Service the operator creates there is owned by the worker's copy
of the Job (:func:`worker_headless_service`): when MultiKueue deletes that Job, the worker's garbage
collector deletes the Service with it.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common
from airflow_provider_gang.reservation.spec import GangSpec


def headless_service(spec: GangSpec, *, owner_uid: str) -> dict[str, Any]:
    """The rendezvous Service selecting the gang's members, exposing ``master_port``."""
    return _service(spec, common.metadata(spec, naming.GangNames(spec.name).service, common.ROLE_RENDEZVOUS, owner_uid))


def worker_headless_service(spec: GangSpec, *, job_uid: str) -> dict[str, Any]:
    """The rendezvous Service on a MultiKueue worker, owned by the worker's Job (uid ``job_uid``)."""
    names = naming.GangNames(spec.name)
    metadata = common.metadata(spec, names.service, common.ROLE_RENDEZVOUS, None)
    metadata["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": names.job, "uid": job_uid, "blockOwnerDeletion": False}
    ]
    return _service(spec, metadata)


def _service(spec: GangSpec, metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {naming.GANG_LABEL: spec.name, naming.ROLE_LABEL: common.ROLE_MEMBER},
            "ports": [
                {"name": "rendezvous", "port": spec.master_port, "targetPort": spec.master_port, "protocol": "TCP"}
            ],
        },
    }

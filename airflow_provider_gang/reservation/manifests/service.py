"""The headless Service that makes rank 0 addressable for rendezvous.

With ``clusterIP: None`` and members carrying ``hostname`` + ``subdomain: <service>``, each member
resolves as ``<hostname>.<service>.<namespace>.svc``. ``publishNotReadyAddresses`` publishes members
before they are Ready: rendezvous happens before any readiness probe could pass.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common
from airflow_provider_gang.reservation.spec import GangSpec


def headless_service(spec: GangSpec, *, owner_uid: str) -> dict[str, Any]:
    """The rendezvous Service selecting the gang's members, exposing ``master_port``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": common.metadata(spec, naming.GangNames(spec.name).service, common.ROLE_RENDEZVOUS, owner_uid),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {naming.GANG_LABEL: spec.name, naming.ROLE_LABEL: common.ROLE_MEMBER},
            "ports": [
                {"name": "rendezvous", "port": spec.master_port, "targetPort": spec.master_port, "protocol": "TCP"}
            ],
        },
    }

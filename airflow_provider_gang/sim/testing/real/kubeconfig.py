"""Kubeconfigs for the real control plane: one cluster, one user authenticated by a client certificate.

The apiserver maps the certificate's CN to the user name and its O entries to groups
(https://kubernetes.io/docs/reference/access-authn-authz/authentication/#x509-client-certificates).
"""

from __future__ import annotations

import base64
from typing import Any

from airflow_provider_gang.sim.testing.real.certificates import CertificateAuthority

CLUSTER_NAME = "gang-real"


def _encoded(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


def document(server: str, authority: CertificateAuthority, user: str, groups: tuple[str, ...] = ()) -> dict[str, Any]:
    """A kubeconfig for ``user`` (in ``groups``) at ``server``, trusting ``authority``'s CA."""
    credentials = authority.client(user, groups)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER_NAME,
                "cluster": {"server": server, "certificate-authority-data": _encoded(authority.certificate_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _encoded(credentials.certificate_pem),
                    "client-key-data": _encoded(credentials.key_pem),
                },
            }
        ],
        "contexts": [
            {"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": user, "namespace": "default"}}
        ],
        "current-context": CLUSTER_NAME,
        "preferences": {},
    }

"""Kubeconfig documents for the real control plane's users: one cluster, one user with a client
certificate, one context (https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/).

The apiserver authenticates the certificate against its ``--client-ca-file`` and reads the user from
its CN and the groups from its O (:meth:`gang_sim.apiserver.tls.CertificateAuthority.client`).
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import yaml

from gang_sim.apiserver.tls import KeyPair
from gang_sim.testing.real.workspace import Workspace


def document(server: str, ca_pem: bytes, user: str, pair: KeyPair, namespace: str = "default") -> dict[str, Any]:
    """A kubeconfig for ``user`` authenticating with ``pair`` against ``server`` (CA ``ca_pem``)."""

    def encoded(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "gang-real", "cluster": {"server": server, "certificate-authority-data": encoded(ca_pem)}}
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": encoded(pair.certificate_pem),
                    "client-key-data": encoded(pair.key_pem),
                },
            }
        ],
        "contexts": [{"name": "gang-real", "context": {"cluster": "gang-real", "user": user, "namespace": namespace}}],
        "current-context": "gang-real",
        "preferences": {},
    }


def write(workspace: Workspace, server: str, user: str, groups: tuple[str, ...], name: str) -> Path:
    """A kubeconfig for ``user`` in ``groups`` (a client certificate of the workspace's CA) written to
    ``name`` under the workspace (mode 0600); its path."""
    pair = workspace.authority.client(user, groups)
    kubeconfig = document(server, workspace.authority.certificate_pem, user, pair)
    return workspace.file(name, yaml.safe_dump(kubeconfig, sort_keys=False))


def copy_to(kubeconfig: Path, target: Path) -> Path:
    """``kubeconfig`` copied to ``target`` (its folder made, mode 0600); ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kubeconfig, target)
    target.chmod(0o600)
    return target

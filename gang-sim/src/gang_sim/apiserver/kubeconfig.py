"""The kubeconfig the emulator writes for its clients (one cluster, one user, one context)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml


def build(
    server: str, token: str, ca_pem: bytes | None, *, name: str = "gang-sim", namespace: str = "default"
) -> dict[str, Any]:
    """A kubeconfig document; ``ca_pem`` None means a plain-HTTP server."""
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }


def write(path: str | os.PathLike[str], document: dict[str, Any]) -> Path:
    """Write atomically with mode 0600 (it holds a bearer token)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    temporary.chmod(0o600)
    temporary.replace(target)
    return target

"""Where the real control plane's binaries are: the cache ``make real-cluster`` builds into.

``hack/real-cluster/build.sh`` builds etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kubectl, kwok and Kueue from Go modules, and the cluster-autoscaler from its upstream
source, into ``${GANG_REAL_CLUSTER_CACHE:-~/.cache/airflow-provider-gang/real-cluster}/<kubernetes
version>/`` (``bin/`` and the upstream manifests in ``manifests/``: Kueue's CRDs and webhooks, the
ProvisioningRequest CRD, kwok's stages). Every one of them is required: a control plane missing any
is not the one the real tier judges by.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.37.2"
REQUIRED = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "kueue",
    "cluster-autoscaler",
)
BUILD_COMMAND = "make real-cluster"


class BinariesMissing(RuntimeError):
    """The cache lacks a required binary; the message names it and the command that builds it."""


def cache_root() -> Path:
    configured = os.environ.get("GANG_REAL_CLUSTER_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "airflow-provider-gang" / "real-cluster"


@dataclass(frozen=True)
class Binaries:
    """The built control plane of one Kubernetes version."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    def path(self, name: str) -> Path:
        return self.bin / name

    @property
    def kubernetes_version(self) -> str:
        return self.root.name


def find(kubernetes_version: str = KUBERNETES_VERSION) -> Binaries:
    """The cached binaries, or :class:`BinariesMissing` naming what is absent and the command that builds it."""
    binaries = Binaries(cache_root() / kubernetes_version)
    missing = [name for name in REQUIRED if not os.access(binaries.path(name), os.X_OK)]
    if missing:
        raise BinariesMissing(
            f"the real control plane is not built ({', '.join(missing)} missing in {binaries.bin}): "
            f"run `{BUILD_COMMAND}` (about 20 minutes on 2 cores and 11 GB, once)"
        )
    return binaries

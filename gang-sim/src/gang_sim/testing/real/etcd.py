"""etcd for one control plane: a single member on loopback, its data in the workspace.

Flags as envtest starts it (controller-runtime ``pkg/internal/testing/controlplane/etcd.go``): client
and peer URLs on 127.0.0.1 and ``--unsafe-no-fsync`` (a test cluster's data need not survive a power
cut; fsync would make every write wait on the disk). ``/health`` answers 200 once it serves.
"""

from __future__ import annotations

from gang_sim.testing.real.ports import LOOPBACK
from gang_sim.testing.real.processes import Launch
from gang_sim.testing.real.workspace import Workspace


def launch(workspace: Workspace) -> Launch:
    """etcd on two held ports; its ``url`` is the client URL the apiserver uses."""
    url = f"http://{LOOPBACK}:{workspace.ports.reserve()}"
    peer_url = f"http://{LOOPBACK}:{workspace.ports.reserve()}"
    command = [
        str(workspace.binaries.path("etcd")),
        f"--data-dir={workspace.directory / 'etcd'}",
        f"--listen-client-urls={url}",
        f"--advertise-client-urls={url}",
        "--listen-peer-urls",
        peer_url,
        "--initial-advertise-peer-urls",
        peer_url,
        "--initial-cluster",
        f"default={peer_url}",
        "--unsafe-no-fsync",
        "--log-level",
        "warn",
    ]
    return Launch("etcd", command, url=url, health_url=f"{url}/health")

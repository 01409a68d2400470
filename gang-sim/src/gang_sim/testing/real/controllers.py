"""kube-controller-manager and kube-scheduler for one control plane: Kubernetes' own controllers.

Both run outside the cluster with the admin kubeconfig for their client, authentication and
authorization delegation, no leader election (one instance each), and HTTPS health endpoints on held
loopback ports with certificates of the workspace's CA. The controller-manager runs every controller
but node IPAM (no pod network; kwok gives pods their IPs), signs service account tokens with the
apiserver's signing key and publishes the CA as ``kube-root-ca.crt``; its garbage collector and the
scheduler get higher client rates than their defaults, as tests create gangs in bursts.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gang_sim.testing.real import apiserver, feature_gates
from gang_sim.testing.real.ports import LOOPBACK
from gang_sim.testing.real.processes import Launch
from gang_sim.testing.real.workspace import Workspace


def _controller_manager_flags(workspace: Workspace) -> list[str]:
    return [
        f"--service-account-private-key-file={workspace.directory / apiserver.SERVICE_ACCOUNT_KEY}",
        f"--root-ca-file={workspace.ca_path}",
        "--use-service-account-credentials=false",
        "--controllers=*,-node-ipam-controller",
        "--concurrent-gc-syncs=20",
        "--kube-api-qps=200",
        "--kube-api-burst=400",
    ]


def _scheduler_flags(workspace: Workspace) -> list[str]:
    return ["--kube-api-qps", "200", "--kube-api-burst", "400"]


_FLAGS = {"kube-controller-manager": _controller_manager_flags, "kube-scheduler": _scheduler_flags}


def launches(workspace: Workspace, kubeconfig: Path, *, workload_api: bool, gates: Iterable[str] = ()) -> list[Launch]:
    """The controller-manager and the scheduler, each healthy once ``/healthz`` answers 200, with the
    Workload API and the alpha ``gates`` (:func:`.feature_gates.workload_api_flags`)."""
    started = []
    for name, flags in _FLAGS.items():
        port = workspace.ports.reserve()
        certificate, key = workspace.serving_files(name)
        command = [
            str(workspace.binaries.path(name)),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--tls-cert-file={certificate}",
            f"--tls-private-key-file={key}",
            *flags(workspace),
            *feature_gates.workload_api_flags(workload_api, apiserver=False, gates=gates),
        ]
        started.append(Launch(name, command, health_url=f"https://{LOOPBACK}:{port}/healthz"))
    return started

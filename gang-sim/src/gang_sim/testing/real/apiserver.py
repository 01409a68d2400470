"""kube-apiserver for one control plane, set up as envtest sets it up (controller-runtime
``pkg/internal/testing/controlplane/apiserver.go``).

It serves HTTPS on a held loopback port with a certificate of the workspace's CA for the names a
client in or out of the cluster uses, authenticates client certificates of that CA
(``--client-ca-file``), authorizes with RBAC, and signs service account tokens with its own key pair
(:func:`gang_sim.testing.real.certificates.service_account_signer`; the controller-manager signs with
the private half, :data:`SERVICE_ACCOUNT_KEY`). With no Service network, ``--endpoint-reconciler-type=none``
keeps it from publishing its address in the ``kubernetes`` Endpoints. The request limits are raised
and priority and fairness is off: tests burst requests that a shared cluster would queue.
"""

from __future__ import annotations

from collections.abc import Iterable

from gang_sim.testing.real import feature_gates
from gang_sim.testing.real.certificates import service_account_signer
from gang_sim.testing.real.ports import LOOPBACK
from gang_sim.testing.real.processes import Launch
from gang_sim.testing.real.workspace import Workspace

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_KEY = "pki/service-account.key"
_SERVING_HOSTS = (LOOPBACK, "localhost", "10.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc")


def launch(workspace: Workspace, etcd_url: str, *, workload_api: bool, gates: Iterable[str] = ()) -> Launch:
    """The apiserver on a held port; its ``url`` is the cluster's, ``/readyz`` its health; the Workload
    API and the alpha ``gates`` as :func:`.feature_gates.workload_api_flags` says."""
    serving_certificate, serving_key = workspace.serving_files("kube-apiserver", _SERVING_HOSTS)
    signer_private, signer_public = service_account_signer()
    signing_key = workspace.file(SERVICE_ACCOUNT_KEY, signer_private)
    verifying_key = workspace.file("pki/service-account.pub", signer_public)
    port = workspace.ports.reserve()
    url = f"https://{LOOPBACK}:{port}"
    command = [
        str(workspace.binaries.path("kube-apiserver")),
        f"--etcd-servers={etcd_url}",
        f"--bind-address={LOOPBACK}",
        f"--advertise-address={LOOPBACK}",
        "--endpoint-reconciler-type=none",
        f"--secure-port={port}",
        f"--cert-dir={workspace.folder('pki')}",
        f"--tls-cert-file={serving_certificate}",
        f"--tls-private-key-file={serving_key}",
        f"--client-ca-file={workspace.ca_path}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={verifying_key}",
        f"--service-account-signing-key-file={signing_key}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        "--allow-privileged=true",
        "--max-requests-inflight=2000",
        "--max-mutating-requests-inflight=1000",
        "--enable-priority-and-fairness=false",
        "--profiling=false",
        "--v=1",
        *feature_gates.workload_api_flags(workload_api, apiserver=True, gates=gates),
    ]
    return Launch("kube-apiserver", command, url=url, health_url=f"{url}/readyz")

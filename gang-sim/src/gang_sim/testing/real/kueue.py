"""Kueue outside the cluster: its configuration, CRDs and webhooks pointed at 127.0.0.1, as envtest does.

Kueue always serves its webhooks (defaulting a Job's ``suspend``, validating queues) and the CRD
conversion between ``v1beta1`` and ``v1beta2`` (sigs.k8s.io/kueue ``cmd/kueue/main.go``). In a
cluster the apiserver reaches them through the Service ``kueue-webhook-service``; here there is no
Service network, so - like controller-runtime's envtest ``ModifyWebhookDefinitions`` - every
``clientConfig.service`` in the webhook configurations and in the conversion of the CRDs that have
one (Kueue's ``config/components/crd/patches/webhook_in_*.yaml``) becomes
``url: https://127.0.0.1:<port><path>`` with our CA as ``caBundle``. Internal certificate management
is off (``internalCertManagement.enable: false``), leader election off, and the serving certificate
sits in ``webhook.certDir``. With internal certificates off, Kueue also loads a metrics serving
certificate from the fixed path ``/etc/kueue/metrics/certs`` at start, whether or not it serves
metrics (``main.go``: ``metricsCertPath``, ``certwatcher.New``); that path is shared by every Kueue on
the machine, so :func:`ensure_metrics_certificate` writes one pair there, of its own CA, once.
"""

from __future__ import annotations

import base64
import copy
import datetime
import fcntl
import os
import ssl
from pathlib import Path
from typing import Any

import yaml

from gang_sim.apiserver.tls import CertificateAuthority
from gang_sim.testing.real.ports import LOOPBACK
from gang_sim.testing.real.processes import Launch
from gang_sim.testing.real.workspace import Workspace

NAMESPACE = "kueue-system"
METRICS_CERTIFICATE_DIRECTORY = Path("/etc/kueue/metrics/certs")
_METRICS_CERTIFICATE_VALIDITY = datetime.timedelta(days=3650)


def namespace() -> dict[str, Any]:
    """The Namespace Kueue runs in (its Configuration's ``namespace``), made before its CRDs."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def configuration(
    *, webhook_port: int, health_port: int, certificate_directory: Path, wait_for_pods_ready_seconds: float | None
) -> dict[str, Any]:
    """Kueue's ``Configuration`` (``config.kueue.x-k8s.io/v1beta2``) for one run outside a cluster."""
    document: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certificate_directory)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 200, "burst": 400},
        "integrations": {"frameworks": ["batch/job"]},
    }
    if wait_for_pods_ready_seconds is not None:
        document["waitForPodsReady"] = {"timeout": f"{int(wait_for_pods_ready_seconds)}s", "blockAdmission": False}
    return document


def _url_config(client_config: dict[str, Any], base_url: str, ca_bundle: str) -> dict[str, Any]:
    path = client_config.get("service", {}).get("path", "")
    return {"url": f"{base_url}{path}", "caBundle": ca_bundle}


def webhook_configurations(manifests: Path, base_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's Mutating- and ValidatingWebhookConfigurations, each webhook calling ``base_url``.

    Only the webhooks of the ``batch/v1`` Job integration and of Kueue's own kinds stay: the others
    (pods, deployments, statefulsets, jobsets, ...) belong to integrations this run does not enable,
    and their ``failurePolicy: Fail`` would refuse objects Kueue does not serve.
    """
    ca_bundle = base64.b64encode(ca_pem).decode()
    documents = [
        document for document in yaml.safe_load_all((manifests / "kueue" / "webhooks.yaml").read_text()) if document
    ]
    configured = []
    for document in documents:
        kept = []
        for webhook in document.get("webhooks", []):
            groups = {group for rule in webhook.get("rules", []) for group in rule.get("apiGroups", [])}
            if not groups <= {"kueue.x-k8s.io", "batch"}:
                continue
            webhook = copy.deepcopy(webhook)
            webhook["clientConfig"] = _url_config(webhook["clientConfig"], base_url, ca_bundle)
            kept.append(webhook)
        configured.append({**document, "metadata": {"name": f"kueue-{document['metadata']['name']}"}, "webhooks": kept})
    return configured


def custom_resource_definitions(manifests: Path, base_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's CRDs; those with a conversion patch convert through ``base_url`` + ``/convert``."""
    ca_bundle = base64.b64encode(ca_pem).decode()
    converted: set[str] = set()
    for patch_path in sorted((manifests / "kueue" / "crd-patches").glob("webhook_in_*.yaml")):
        patch = yaml.safe_load(patch_path.read_text())
        converted.add(patch["metadata"]["name"])
    definitions = []
    for path in sorted((manifests / "kueue" / "crd").glob("*.yaml")):
        definition = yaml.safe_load(path.read_text())
        if definition["metadata"]["name"] in converted:
            definition["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": f"{base_url}/convert", "caBundle": ca_bundle},
                    "conversionReviewVersions": ["v1"],
                },
            }
        definitions.append(definition)
    return definitions


def launch(workspace: Workspace, kubeconfig: Path, *, wait_for_pods_ready_seconds: float | None) -> Launch:
    """Kueue with its configuration and webhook certificate in the workspace; its ``url`` is the base
    URL of its webhook server (:func:`custom_resource_definitions`, :func:`webhook_configurations`)."""
    webhook_port, health_port = workspace.ports.reserve(), workspace.ports.reserve()
    certificate_directory = workspace.folder("kueue-webhook")
    workspace.authority.serving("kueue-webhook").write(certificate_directory, "tls")
    ensure_metrics_certificate()
    document = configuration(
        webhook_port=webhook_port,
        health_port=health_port,
        certificate_directory=certificate_directory,
        wait_for_pods_ready_seconds=wait_for_pods_ready_seconds,
    )
    configuration_path = workspace.file("kueue.yaml", yaml.safe_dump(document, sort_keys=False))
    command = [
        str(workspace.binaries.path("kueue")),
        f"--config={configuration_path}",
        "--feature-gates=VisibilityOnDemand=false",
        "--zap-log-level=info",
    ]
    return Launch(
        "kueue",
        command,
        url=f"https://{LOOPBACK}:{webhook_port}",
        health_url=f"http://{LOOPBACK}:{health_port}/readyz",
        environment={"KUBECONFIG": str(kubeconfig)},
    )


def _is_key_pair(certificate: Path, key: Path) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(certificate, key)
    except (OSError, ssl.SSLError):
        return False
    return True


def _replace(path: Path, content: bytes, mode: int) -> None:
    """Write ``path`` whole or not at all (a Kueue starting meanwhile reads the old file or the new)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_bytes(content)
    partial.chmod(mode)
    os.replace(partial, path)


def ensure_metrics_certificate(directory: Path = METRICS_CERTIFICATE_DIRECTORY) -> None:
    """A certificate and its key in ``directory``, written unless a matching pair is there already.

    Under an exclusive lock on ``directory/.lock``, so control planes starting at once in any process
    write one pair between them. The pair is valid for ten years and of its own CA: Kueue only loads it
    (the configuration serves no metrics), and every Kueue on the machine shares it.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = (directory / ".lock").open("a")
    except PermissionError:
        raise PermissionError(
            f"Kueue reads its metrics certificate from {directory} when it does not manage its own "
            "certificates: create that directory writable for this user (or run as root)"
        ) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        certificate, key = directory / "tls.crt", directory / "tls.key"
        if _is_key_pair(certificate, key):
            return
        pair = CertificateAuthority("gang-real-kueue-metrics-ca", _METRICS_CERTIFICATE_VALIDITY).serving(
            "kueue-metrics"
        )
        _replace(key, pair.key_pem, 0o600)
        _replace(certificate, pair.certificate_pem, 0o644)

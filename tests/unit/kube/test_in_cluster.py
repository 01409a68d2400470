"""In-cluster settings: kubernetes_asyncio's service-account loader, pointed at the emulator the way a
pod sees its API server (KUBERNETES_SERVICE_HOST/PORT, mounted token and CA files)."""

from __future__ import annotations

import base64
from urllib.parse import urlparse

import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.settings import ConnectionSettings


async def test_in_cluster_settings_reach_the_api_with_the_mounted_service_account(sim, monkeypatch, tmp_path):
    kubeconfig = yaml.safe_load(sim.harness.kubeconfig_path.read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    server = urlparse(cluster["server"])
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text(sim.harness.token)
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", server.hostname)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    monkeypatch.setattr("kubernetes_asyncio.config.incluster_config.SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr("kubernetes_asyncio.config.incluster_config.SERVICE_CERT_FILENAME", str(ca))
    settings = ConnectionSettings.from_dict(ConnectionSettings(in_cluster=True, namespace="kube-system").to_dict())
    async with await KubeClient.connect(settings) as client:
        items, version = await client.list(PODS)
    assert items == [] and version
    assert sim.metrics()["requests"]["list"] == {"pods": 1}

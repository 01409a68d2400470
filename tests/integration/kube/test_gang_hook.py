"""GangHook: an Airflow ``kubernetes`` connection resolved by KubernetesHook, handed on as plain settings."""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from airflow.exceptions import AirflowException

from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.kube.settings import ConnectionSettings


def kubeconfig(ca_file: str | None = None, ca_data: str | None = None) -> dict[str, object]:
    cluster: dict[str, object] = {"server": "https://127.0.0.1:6443"}
    if ca_file:
        cluster["certificate-authority"] = ca_file
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": "secret"}}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u"}},
            {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "x"}},
        ],
        "current-context": "main",
    }


def connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **extra: object) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    return conn_id


def test_inline_kubeconfig_yaml_becomes_settings_with_context_and_namespace(monkeypatch):
    config = kubeconfig(ca_data=base64.b64encode(b"pem").decode())
    conn_id = connection(
        monkeypatch, "gang_inline", kube_config=yaml.safe_dump(config), cluster_context="other", namespace="ml"
    )
    settings = GangHook(conn_id=conn_id).connection_settings()
    assert settings == ConnectionSettings(kubeconfig=config, context="other", namespace="ml")
    assert ConnectionSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings


def test_kubeconfig_path_is_read_and_relative_files_are_inlined(monkeypatch, tmp_path):
    (tmp_path / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig(ca_file="ca.crt")))
    conn_id = connection(monkeypatch, "gang_path", kube_config_path=str(path))
    settings = GangHook(conn_id=conn_id).connection_settings()
    assert settings.kubeconfig is not None
    cluster = settings.kubeconfig["clusters"][0]["cluster"]
    assert "certificate-authority" not in cluster
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"-----BEGIN CERTIFICATE-----\n"
    assert settings.namespace == "default"


def test_exclusive_options_are_rejected_by_the_parent_resolution(monkeypatch, tmp_path):
    conn_id = connection(monkeypatch, "gang_both", in_cluster=True, kube_config=json.dumps(kubeconfig()))
    with pytest.raises(AirflowException, match="mutually exclusive"):
        GangHook(conn_id=conn_id).connection_settings()


def test_in_cluster_connection_hands_on_the_in_cluster_flag(monkeypatch, tmp_path):
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("service-account-token")
    ca.write_text("pem")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_CERT_FILENAME", str(ca))
    conn_id = connection(monkeypatch, "gang_incluster", in_cluster=True, namespace="jobs")
    assert GangHook(conn_id=conn_id).connection_settings() == ConnectionSettings(in_cluster=True, namespace="jobs")

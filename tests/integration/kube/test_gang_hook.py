"""GangHook: an Airflow ``kubernetes`` connection resolved by KubernetesHook, handed on as plain settings."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from typing import Any

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


def write_kubeconfig(path: Any, *, cluster: str, contexts: list[str], current: str, ca: str) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": cluster, "cluster": {"server": f"https://{cluster}:6443", "certificate-authority": ca}}
                ],
                "users": [{"name": "shared", "user": {"token": f"token-of-{path.parent.name}"}}],
                "contexts": [{"name": name, "context": {"cluster": cluster, "user": "shared"}} for name in contexts],
                "current-context": current,
            }
        )
    )


def two_kubeconfigs(tmp_path: Any) -> str:
    """Two kubeconfig files in directories of their own, each with a relative CA file; both name the
    user ``shared`` and the context ``both``; each sets its own current context. A third path that
    does not exist is skipped."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, pem in ((first, b"first-ca"), (second, b"second-ca")):
        folder.mkdir()
        (folder / "ca.crt").write_bytes(pem)
    write_kubeconfig(first / "config", cluster="one", contexts=["both"], current="both", ca="ca.crt")
    write_kubeconfig(second / "config", cluster="two", contexts=["both", "two"], current="two", ca="ca.crt")
    return os.pathsep.join([str(first / "config"), str(second / "config"), str(tmp_path / "missing")])


def assert_merged_as_the_kubernetes_library_merges(kubeconfig: dict[str, Any]) -> None:
    clusters = {entry["name"]: entry["cluster"] for entry in kubeconfig["clusters"]}
    assert set(clusters) == {"one", "two"}
    # Each CA file is read relative to its own kubeconfig's directory.
    assert base64.b64decode(clusters["one"]["certificate-authority-data"]) == b"first-ca"
    assert base64.b64decode(clusters["two"]["certificate-authority-data"]) == b"second-ca"
    assert all("certificate-authority" not in cluster for cluster in clusters.values())
    # The first file to name a user or context wins; the last current-context set wins.
    (user,) = kubeconfig["users"]
    assert user == {"name": "shared", "user": {"token": "token-of-first"}}
    contexts = {entry["name"]: entry["context"]["cluster"] for entry in kubeconfig["contexts"]}
    assert contexts == {"both": "one", "two": "two"}
    assert kubeconfig["current-context"] == "two"


def test_several_kubeconfig_files_in_the_path_extra_are_merged_by_the_library(monkeypatch, tmp_path):
    paths = two_kubeconfigs(tmp_path)
    conn_id = connection(monkeypatch, "gang_paths", kube_config_path=paths, cluster_context="both")
    settings = GangHook(conn_id=conn_id).connection_settings()
    assert settings.kubeconfig is not None and settings.context == "both"
    assert_merged_as_the_kubernetes_library_merges(settings.kubeconfig)


def test_several_files_in_KUBECONFIG_are_merged_for_a_connection_without_configuration(tmp_path):
    """``KUBECONFIG`` as a worker process starts with it (the library reads it when it is imported):
    a connection with no configuration of its own, outside a cluster, loads the default kubeconfig."""
    program = (
        "import json; from airflow_provider_gang.hooks.gang import GangHook; "
        "print(json.dumps(GangHook(conn_id='gang_default_files').connection_settings().to_dict()))"
    )
    environment = {
        **{key: value for key, value in os.environ.items() if not key.startswith("KUBERNETES_SERVICE")},
        "KUBECONFIG": two_kubeconfigs(tmp_path),
        "AIRFLOW_CONN_GANG_DEFAULT_FILES": json.dumps({"conn_type": "kubernetes", "extra": {"namespace": "ml"}}),
    }
    result = subprocess.run(
        [sys.executable, "-c", program], env=environment, capture_output=True, text=True, timeout=60, check=True
    )
    settings = ConnectionSettings.from_dict(json.loads(result.stdout.strip().splitlines()[-1]))
    assert settings.kubeconfig is not None and settings.namespace == "ml" and settings.context is None
    assert_merged_as_the_kubernetes_library_merges(settings.kubeconfig)


def test_extras_of_a_connection_made_before_airflow_2_3_are_read_with_their_prefix(monkeypatch, tmp_path):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig(ca_data=base64.b64encode(b"pem").decode())))
    conn_id = connection(
        monkeypatch,
        "gang_legacy",
        extra__kubernetes__kube_config_path=str(path),
        extra__kubernetes__cluster_context="other",
        extra__kubernetes__disable_verify_ssl="true",
    )
    hook = GangHook(conn_id=conn_id)
    settings = hook.connection_settings()
    assert (settings.context, settings.verify_ssl) == ("other", False)
    assert settings.kubeconfig == kubeconfig(ca_data=base64.b64encode(b"pem").decode())
    assert hook.extra("cluster_context") == "other" and hook.extra("namespace") is None


def test_an_empty_extra_counts_as_unset(monkeypatch):
    config = kubeconfig()
    conn_id = connection(monkeypatch, "gang_empty", kube_config=json.dumps(config), cluster_context="", namespace="")
    settings = GangHook(conn_id=conn_id).connection_settings()
    assert (settings.context, settings.namespace, settings.verify_ssl) == (None, "default", True)


def test_a_missing_kubeconfig_file_is_refused_by_the_parent_resolution(monkeypatch, tmp_path):
    from kubernetes.config.config_exception import ConfigException

    conn_id = connection(monkeypatch, "gang_missing", kube_config_path=str(tmp_path / "nothing"))
    with pytest.raises(ConfigException, match="No configuration found"):
        GangHook(conn_id=conn_id).connection_settings()


def test_the_hook_uses_no_private_name_of_another_library() -> None:
    """``KubernetesHook._get_field`` and the like are the cncf provider's internals: the hook reads
    only public names (``conn_extras``, ``kubernetes.config.kube_config``'s ``KubeConfigMerger`` and
    ``FileOrData``)."""
    import ast
    import inspect

    from airflow_provider_gang.hooks import gang

    tree = ast.parse(inspect.getsource(gang))
    private = [
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]
    imported = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == [] and imported == []

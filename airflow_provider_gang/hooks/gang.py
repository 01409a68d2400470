"""``GangHook``: an Airflow ``kubernetes`` connection turned into explicit settings for triggers.

The hook *is* cncf-kubernetes' ``KubernetesHook`` (same connection type, ``kubernetes_default``, same
extras: ``in_cluster``, ``kube_config_path``, ``kube_config`` (JSON/YAML), ``cluster_context``,
``namespace``, ``disable_verify_ssl``). Its ``get_conn()`` does the resolution - mutual exclusion of the
options, and with none set "in-cluster first, then the default kubeconfig" - and this hook only records
the outcome: in-cluster, or the kubeconfig that was loaded, as a dict.

The dict is needed because the triggerer may run elsewhere: cncf-kubernetes' ``AsyncKubernetesHook``
ignores ``config_file`` and has no in-cluster fallback (``AsyncKubernetesHook._load_config`` in apache/airflow
``providers/cncf/kubernetes/src/airflow/providers/cncf/kubernetes/hooks/kubernetes.py``; issues #34644 and
PR #72301). File references in the kubeconfig (CA, client certificate and key) are inlined as ``*-data``
so the dict does not depend on the worker's files. Exec plugins are kept as they are: the plugin binary
must exist on the triggerer, as for any kubeconfig.
"""

from __future__ import annotations

import base64
import copy
import os
from pathlib import Path
from typing import Any

import yaml
from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

from airflow_provider_gang.kube.settings import ConnectionSettings

_DEFAULT_KUBECONFIG = "~/.kube/config"
# (section, entry key, file field, inline field) of the kubeconfig file references that are inlined.
_FILE_REFERENCES = (
    ("clusters", "cluster", "certificate-authority", "certificate-authority-data"),
    ("users", "user", "client-certificate", "client-certificate-data"),
    ("users", "user", "client-key", "client-key-data"),
)


class GangHook(KubernetesHook):
    """Kubernetes hook that also produces serializable :class:`ConnectionSettings` for gang triggers."""

    def connection_settings(self) -> ConnectionSettings:
        """Resolve the connection exactly as ``KubernetesHook.get_conn()`` does and describe the result.

        Raises what ``get_conn()`` raises for an invalid connection (several exclusive options set, an
        unreadable kubeconfig, no configuration at all).
        """
        self.get_conn()
        namespace = self.get_namespace() or "default"
        verify_ssl = str(self._field("disable_verify_ssl") or "").lower() not in ("true", "1")
        if self.disable_verify_ssl is not None:
            verify_ssl = not self.disable_verify_ssl
        if self.is_in_cluster:
            return ConnectionSettings(in_cluster=True, namespace=namespace, verify_ssl=verify_ssl)
        context = _first_set(self.cluster_context, self._field("cluster_context"))
        return ConnectionSettings(
            kubeconfig=self._loaded_kubeconfig(), context=context, namespace=namespace, verify_ssl=verify_ssl
        )

    def _field(self, name: str) -> Any:
        """A connection extra, through the parent's handling of the legacy ``extra__kubernetes__`` prefix."""
        parent: Any = super()
        return parent._get_field(name)

    def _loaded_kubeconfig(self) -> dict[str, Any]:
        """The kubeconfig ``get_conn()`` used, in its order of precedence, as a self-contained dict."""
        path = _first_set(self.config_file, self._field("kube_config_path"))
        inline = self._field("kube_config")
        if path is not None:
            return _read_kubeconfig_files(str(path))
        if inline is not None:
            loaded = inline if isinstance(inline, dict) else yaml.safe_load(inline)
            return _inline_file_references(dict(loaded), base=Path.cwd())
        if self.config_dict:
            return _inline_file_references(dict(self.config_dict), base=Path.cwd())
        return _read_kubeconfig_files(os.environ.get("KUBECONFIG") or _DEFAULT_KUBECONFIG)


def _first_set(*values: Any) -> Any:
    """First value that is not ``None`` (``KubernetesHook._coalesce_param``)."""
    return next((value for value in values if value is not None), None)


def _read_kubeconfig_files(paths: str) -> dict[str, Any]:
    """Read the kubeconfig file(s) of ``paths`` (``KUBECONFIG`` syntax, ``os.pathsep``-separated).

    Merged by kubectl's rule: the first file to define a cluster, user or context name wins, and the
    first ``current-context`` set wins. Relative file references resolve against their own file's
    directory before merging.
    """
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    found = False
    for raw_path in paths.split(os.pathsep):
        path = Path(os.path.expanduser(raw_path)) if raw_path else None
        if path is None or not path.exists():
            continue
        found = True
        loaded = _inline_file_references(dict(yaml.safe_load(path.read_text()) or {}), base=path.parent)
        for section in ("clusters", "users", "contexts"):
            known = {entry.get("name") for entry in merged[section]}
            merged[section].extend(entry for entry in loaded.get(section) or () if entry.get("name") not in known)
        if loaded.get("current-context") and not merged.get("current-context"):
            merged["current-context"] = loaded["current-context"]
    if not found:
        raise FileNotFoundError(f"no kubeconfig found at {paths!r}")
    return merged


def _inline_file_references(kubeconfig: dict[str, Any], *, base: Path) -> dict[str, Any]:
    """Copy of ``kubeconfig`` with certificate and key *files* replaced by their base64 ``*-data``.

    Relative paths are resolved against ``base``, the kubeconfig's directory (kubectl's rule).
    """
    result = copy.deepcopy(kubeconfig)
    for section, entry_key, file_field, data_field in _FILE_REFERENCES:
        for entry in result.get(section) or ():
            body = entry.get(entry_key) if isinstance(entry, dict) else None
            if not isinstance(body, dict) or not body.get(file_field) or body.get(data_field):
                continue
            file_path = Path(os.path.expanduser(str(body.pop(file_field))))
            if not file_path.is_absolute():
                file_path = base / file_path
            body[data_field] = base64.b64encode(file_path.read_bytes()).decode()
    return result

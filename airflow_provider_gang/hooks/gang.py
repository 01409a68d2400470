"""``GangHook``: an Airflow ``kubernetes`` connection turned into explicit settings for triggers.

The hook *is* cncf-kubernetes' ``KubernetesHook`` (same connection type, ``kubernetes_default``, same
extras: ``in_cluster``, ``kube_config_path``, ``kube_config`` (JSON/YAML), ``cluster_context``,
``namespace``, ``disable_verify_ssl``). Its ``get_conn()`` does the resolution - mutual exclusion of the
options, and with none set "in-cluster first, then the default kubeconfig" - and this hook only records
the outcome: in-cluster, or the kubeconfig that was loaded, as a dict.

The dict is needed because the triggerer may run elsewhere: cncf-kubernetes' ``AsyncKubernetesHook``
ignores ``config_file`` and has no in-cluster fallback (``AsyncKubernetesHook._load_config`` in apache/airflow
``providers/cncf/kubernetes/src/airflow/providers/cncf/kubernetes/hooks/kubernetes.py``; issues #34644 and
PR #72301). Kubeconfig files are read and merged by the kubernetes library itself
(``kubernetes.config.kube_config.KubeConfigMerger``, what ``config.load_kube_config`` and so ``get_conn()``
use): a ``KUBECONFIG``-style list of files (``os.pathsep``-separated, in ``KUBECONFIG``, in
``kube_config_path`` or in the hook's ``config_file``) is merged as the library merges it - the first
file to name a cluster, user or context wins, and the last file that sets ``current-context`` wins.
File references in the kubeconfig (CA, client certificate and key) are inlined as ``*-data`` by the
library's ``FileOrData``, a relative path against its own file's directory, so the dict does not
depend on the worker's files. Exec plugins are kept as they are: the plugin binary must exist on the
triggerer, as for any kubeconfig.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml
from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from kubernetes.config import kube_config

from airflow_provider_gang.kube.settings import ConnectionSettings

LEGACY_EXTRA_PREFIX = "extra__kubernetes__"
"""How connections made before Airflow 2.3 name their extras (``KubernetesHook`` reads both forms)."""
_SECTIONS = ("clusters", "users", "contexts")
# section -> (entry key, the file fields the library reads through FileOrData) of the inlined references.
_FILE_REFERENCES = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key")),
}


class GangHook(KubernetesHook):
    """Kubernetes hook that also produces serializable :class:`ConnectionSettings` for gang triggers."""

    def connection_settings(self) -> ConnectionSettings:
        """Resolve the connection exactly as ``KubernetesHook.get_conn()`` does and describe the result.

        Raises what ``get_conn()`` raises for an invalid connection (several exclusive options set, an
        unreadable kubeconfig, no configuration at all).
        """
        self.get_conn()
        namespace = self.get_namespace() or "default"
        verify_ssl = str(self.extra("disable_verify_ssl") or "").lower() not in ("true", "1")
        if self.disable_verify_ssl is not None:
            verify_ssl = not self.disable_verify_ssl
        if self.is_in_cluster:
            return ConnectionSettings(in_cluster=True, namespace=namespace, verify_ssl=verify_ssl)
        context = _first_set(self.cluster_context, self.extra("cluster_context"))
        return ConnectionSettings(
            kubeconfig=self._loaded_kubeconfig(), context=context, namespace=namespace, verify_ssl=verify_ssl
        )

    def extra(self, name: str) -> Any:
        """The connection's extra ``name`` (or its legacy ``extra__kubernetes__<name>`` key), ``None``
        when unset or empty, as ``KubernetesHook`` reads its extras (from its public ``conn_extras``)."""
        extras = self.conn_extras
        if name in extras:
            return extras[name] or None
        return extras.get(f"{LEGACY_EXTRA_PREFIX}{name}") or None

    def _loaded_kubeconfig(self) -> dict[str, Any]:
        """The kubeconfig ``get_conn()`` used, in its order of precedence, as a self-contained dict."""
        path = _first_set(self.config_file, self.extra("kube_config_path"))
        inline = self.extra("kube_config")
        if path is not None:
            return merged_kubeconfig(str(path))
        if inline is not None:
            loaded = inline if isinstance(inline, dict) else yaml.safe_load(inline)
            return self_contained(dict(loaded), base=Path.cwd())
        if self.config_dict:
            return self_contained(dict(self.config_dict), base=Path.cwd())
        return merged_kubeconfig(kube_config.KUBE_CONFIG_DEFAULT_LOCATION)


def _first_set(*values: Any) -> Any:
    """First value that is not ``None`` (``KubernetesHook._coalesce_param``)."""
    return next((value for value in values if value is not None), None)


def merged_kubeconfig(paths: str) -> dict[str, Any]:
    """The kubeconfig file(s) of ``paths`` (``KUBECONFIG`` syntax) merged by ``KubeConfigMerger``
    (module docstring), each entry's file references inlined against its own file's directory.
    ``FileNotFoundError`` when none of the files exists."""
    merged = kube_config.KubeConfigMerger(paths).config
    if merged is None:
        raise FileNotFoundError(f"no kubeconfig found at {paths!r}")
    result = {key: copy.deepcopy(value) for key, value in merged.value.items() if key not in _SECTIONS}
    for section in _SECTIONS:
        result[section] = [
            _entry_self_contained(section, node.value, base=Path(os.path.dirname(node.path)))
            for node in merged.value.get(section) or ()
        ]
    return result


def self_contained(kubeconfig: dict[str, Any], *, base: Path) -> dict[str, Any]:
    """Copy of one ``kubeconfig`` dict with its certificate and key *files* replaced by their base64
    ``*-data``, relative paths resolved against ``base``."""
    result = copy.deepcopy(kubeconfig)
    for section in _FILE_REFERENCES:
        result[section] = [_entry_self_contained(section, entry, base=base) for entry in result.get(section) or ()]
    return result


def _entry_self_contained(section: str, entry: Any, *, base: Path) -> Any:
    """Copy of one ``section`` entry with its file references inlined through the library's
    ``FileOrData`` (which keeps a ``*-data`` already there)."""
    entry = copy.deepcopy(entry)
    key, fields = _FILE_REFERENCES.get(section, ("", ()))
    body = entry.get(key) if isinstance(entry, dict) else None
    for field in fields:
        if isinstance(body, dict) and body.get(field):
            body[f"{field}-data"] = kube_config.FileOrData(body, field, file_base_path=str(base)).as_data()
            del body[field]
    return entry

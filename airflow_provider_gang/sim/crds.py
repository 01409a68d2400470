"""The real CRDs shipped as package data (``sim/crds/``, provenance in its README).

ProvisioningRequest (``autoscaling.x-k8s.io`` v1 + v1beta1) and Kueue (``kueue.x-k8s.io`` v1beta2 +
v1beta1). The Kueue Workload CRD is 1.4 MB of YAML, so files are parsed once per process with
libyaml's ``CSafeLoader`` and the parsed documents are shared; the store never mutates stored
objects in place, so sharing is safe.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

from airflow_provider_gang.sim.store import CRD_KEY, Store

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # libyaml missing: correct but slower
    _Loader = yaml.SafeLoader


@functools.lru_cache(maxsize=1)
def bundled_crds() -> tuple[dict[str, Any], ...]:
    """Every CustomResourceDefinition document in the package's ``crds`` directory."""
    documents: list[dict[str, Any]] = []
    folder = resources.files("airflow_provider_gang.sim") / "crds"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            for document in yaml.load_all(entry.read_text(encoding="utf-8"), Loader=_Loader):
                if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                    documents.append(document)
    return tuple(documents)


def install_bundled_crds(store: Store) -> list[str]:
    """Create every bundled CRD in ``store`` (skipping ones that exist); returns their names."""
    names: list[str] = []
    for crd in bundled_crds():
        name = crd["metadata"]["name"]
        existing, _ = store.list(CRD_KEY, field_selector=f"metadata.name={name}")
        if not existing:
            store.create_shared(CRD_KEY, crd)
        names.append(name)
    return names

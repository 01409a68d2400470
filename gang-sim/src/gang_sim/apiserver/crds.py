"""The real CRDs shipped as package data (``gang_sim/apiserver/crds/``, provenance in its README).

ProvisioningRequest (``autoscaling.x-k8s.io`` v1 + v1beta1) and Kueue (``kueue.x-k8s.io`` v1beta2; its
v1beta1 only with ``kueue_v1beta1=True``: Kueue 0.20 stopped serving v1beta1, kubernetes-sigs/kueue
``CHANGELOG/CHANGELOG-0.20.md`` #14558, while 0.16 - 0.19 served it deprecated). The Kueue Workload
CRD is 1.4 MB of YAML, so files are parsed once per process with libyaml's ``CSafeLoader`` and the
parsed documents are shared; the store never mutates stored objects in place, so sharing is safe.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

from gang_sim.apiserver import errors
from gang_sim.apiserver.kinds import strategy_for
from gang_sim.apiserver.store import CRD_KEY, Store

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # libyaml missing: correct but slower
    _Loader = yaml.SafeLoader


@functools.lru_cache(maxsize=1)
def bundled_crds() -> tuple[dict[str, Any], ...]:
    """Every CustomResourceDefinition document in the package's ``crds`` directory."""
    documents: list[dict[str, Any]] = []
    folder = resources.files("gang_sim.apiserver") / "crds"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            for document in yaml.load_all(entry.read_text(encoding="utf-8"), Loader=_Loader):
                if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                    documents.append(document)
    return tuple(documents)


KUEUE_GROUP = "kueue.x-k8s.io"


def install_bundled_crds(store: Store, *, kueue_v1beta1: bool = False) -> list[str]:
    """Create every bundled CRD in ``store`` (skipping ones that exist); returns their names.

    ``kueue_v1beta1`` serves Kueue's deprecated v1beta1 beside v1beta2, as Kueue <= 0.19 did;
    by default only v1beta2 is served, as Kueue 0.20.
    """
    names: list[str] = []
    for crd in bundled_crds():
        name = crd["metadata"]["name"]
        existing, _ = store.list(CRD_KEY, field_selector=f"metadata.name={name}")
        if not existing:
            _create_shared(store, crd if kueue_v1beta1 else without_kueue_v1beta1(crd))
        names.append(name)
    return names


def without_kueue_v1beta1(crd: dict[str, Any]) -> dict[str, Any]:
    """``crd`` with Kueue's v1beta1 not served (other CRDs unchanged); shares the schemas."""
    if crd["spec"].get("group") != KUEUE_GROUP:
        return crd
    versions = [
        {**version, "served": False} if version.get("name") == "v1beta1" else version
        for version in crd["spec"]["versions"]
    ]
    return {**crd, "spec": {**crd["spec"], "versions": versions}}


def _create_shared(store: Store, body: dict[str, Any]) -> dict[str, Any]:
    """Create a bundled CRD without deep-copying its (large, shared, never mutated) nested parts.

    Only the top level and ``metadata`` are copied; CRD validation is skipped (the files are the
    upstream ones), so the object goes to the table's commit API (:meth:`.object_table.ObjectTable.commit`)
    rather than through :meth:`Store.create`'s admission. Metadata, status and events are as for a create.
    """
    resource_type = store.resolve(CRD_KEY)
    new = dict(body)
    new["metadata"] = {k: v for k, v in (body.get("metadata") or {}).items() if k in ("name", "labels", "annotations")}
    new.pop("status", None)
    new["apiVersion"], new["kind"] = resource_type.api_version, resource_type.kind
    if store.stored((resource_type.storage_key, "", new["metadata"]["name"])) is not None:
        raise errors.already_exists(resource_type.plural, new["metadata"]["name"], resource_type.group)
    initial = strategy_for(resource_type).initial_status(new)
    if initial is not None:
        new["status"] = initial
    table = store.table
    new["metadata"].update(uid=table.new_uid(), creationTimestamp=table.timestamp(), generation=1)
    committed = table.commit(resource_type, "ADDED", new, None)
    store.serve_crd(committed)
    return committed

"""The ``objects:`` field of a scenario: Kubernetes objects the cluster has from its first second.

Each item is a complete manifest (``apiVersion``, ``kind``, ``metadata.name``, the rest as
``kubectl apply -f`` would take it), for example Kueue's v1beta2 ResourceFlavors, ClusterQueues and
LocalQueues, or a Namespace for them. Namespaced objects without ``metadata.namespace`` go to
``default``; a Namespace listed earlier may be used by later items.

Loading validates every item as the emulator's API server would (:func:`check_objects`): the items
are created, in order, in a throwaway :class:`~gang_sim.apiserver.store.Store` that serves the
bundled CRDs (:mod:`gang_sim.apiserver.crds`, the upstream CRD YAML with its OpenAPI schemas),
with ``fieldValidation=Strict``, so a kind the emulator does not serve, a missing required field, a
wrong type or an unknown field is a :class:`ScenarioError` naming ``objects[<index>]`` and the API's
message. When the control plane starts (:func:`create_objects`, from ``controllers.plane.build``)
they are created in the same order in the real Store, before any controller runs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from gang_sim.apiserver.crds import install_bundled_crds
from gang_sim.apiserver.errors import ApiError
from gang_sim.apiserver.store import Store
from gang_sim.world.scenario_fields import ScenarioError

Obj = dict[str, Any]


def resource_key(store: Store, manifest: Mapping[str, Any], path: str) -> str:
    """``<apiVersion>/<plural>`` of ``manifest``'s kind in ``store``; ScenarioError if not served."""
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise ScenarioError(f"{path}.apiVersion", "is required")
    if not isinstance(kind, str) or not kind:
        raise ScenarioError(f"{path}.kind", "is required")
    resource_type = store.registry.by_kind(api_version, kind)
    if resource_type is None:
        raise ScenarioError(f"{path}.kind", f"the emulator serves no kind {kind!r} in {api_version!r}")
    return resource_type.key


def create_objects(store: Store, objects: Sequence[Mapping[str, Any]], *, path: str = "objects") -> list[Obj]:
    """Create ``objects`` in ``store`` in order (Strict field validation); return what was stored.

    Raises :class:`ScenarioError` naming ``<path>[<index>]`` when one is refused.
    """
    created = []
    for index, manifest in enumerate(objects):
        at = f"{path}[{index}]"
        key = resource_key(store, manifest, at)
        body = copy.deepcopy(dict(manifest))
        metadata = body.get("metadata")
        namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
        try:
            created.append(store.create(key, body, namespace, field_validation="Strict"))
        except ApiError as error:
            raise ScenarioError(at, f"{manifest.get('kind')} refused by the API: {error}") from None
    return created


def check_objects(objects: Sequence[object]) -> tuple[Obj, ...]:
    """Validate ``objects`` (module docstring) and return them as plain dicts, unchanged."""
    manifests: list[Mapping[str, Any]] = []
    for index, item in enumerate(objects):
        if not isinstance(item, Mapping):
            raise ScenarioError(f"objects[{index}]", f"must be a mapping (a manifest), got {type(item).__name__}")
        manifests.append(item)
    store = Store()
    install_bundled_crds(store)
    create_objects(store, manifests)
    return tuple(copy.deepcopy(dict(item)) for item in manifests)

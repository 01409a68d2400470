"""The owner ConfigMap: created first, named in every other object's ``ownerReferences``.

Deleting it lets the garbage collector delete the whole gang (PodTemplate, ProvisioningRequest,
Job, pods, Service), which makes cleanup one idempotent call. Its ``data`` records the spec of the
try, so an operator that restarts can check it adopts the objects of the same gang.

The annotation :data:`OWNER_TRY_ANNOTATION` names the Airflow try that owns the gang now: the try
that created it, or the later try that adopted it (a cleared or crashed try's gang is adopted by the
next one). Every adopting try writes it before it touches anything else of the gang, so a cancelled
trigger of an older try can tell that its gang was taken over (``triggers.kill``).
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common
from airflow_provider_gang.reservation.spec import GangSpec

SPEC_KEY = "spec.json"
OWNER_TRY_ANNOTATION = f"{naming.LABEL_PREFIX}/owner-try"
"""Annotation of the owner ConfigMap: the try number (decimal string) that owns the gang now."""


def owner_config_map(spec: GangSpec, *, owner_try: int | None = None) -> dict[str, Any]:
    """The owner ConfigMap of ``spec`` (it owns everything else and is owned by nothing), marked as
    owned by try ``owner_try`` when given."""
    metadata = common.metadata(spec, naming.GangNames(spec.name).owner, common.ROLE_OWNER, None)
    if owner_try is not None:
        metadata["annotations"] = owner_try_annotations(owner_try)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {
            "mode": spec.mode.value,
            "size": str(spec.size),
            SPEC_KEY: json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":")),
        },
    }


def recorded_spec(config_map: dict[str, Any]) -> GangSpec:
    """The spec an owner ConfigMap recorded (raises ``GangSpecError``/``KeyError`` if unusable)."""
    return GangSpec.from_dict(json.loads(config_map["data"][SPEC_KEY]))


def owner_try_annotations(owner_try: int) -> dict[str, str]:
    """The annotations marking the gang as owned by try ``owner_try`` (also the adopting merge patch's)."""
    return {OWNER_TRY_ANNOTATION: str(owner_try)}


def recorded_owner_try(config_map: dict[str, Any]) -> int | None:
    """The try that owns the gang according to its owner ConfigMap; ``None`` when unmarked or
    unreadable."""
    value = (config_map.get("metadata", {}).get("annotations") or {}).get(OWNER_TRY_ANNOTATION)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None

"""The owner ConfigMap: created first, named in every other object's ``ownerReferences``.

Deleting it lets the garbage collector delete the whole gang (PodTemplate, ProvisioningRequest,
Job, pods, Service), which makes cleanup one idempotent call. Its ``data`` records the spec of the
try, so an operator that restarts can check it adopts the objects of the same gang.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common
from airflow_provider_gang.reservation.spec import GangSpec

SPEC_KEY = "spec.json"


def owner_config_map(spec: GangSpec) -> dict[str, Any]:
    """The owner ConfigMap of ``spec`` (it owns everything else and is owned by nothing)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": common.metadata(spec, naming.GangNames(spec.name).owner, common.ROLE_OWNER, None),
        "data": {
            "mode": spec.mode.value,
            "size": str(spec.size),
            SPEC_KEY: json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":")),
        },
    }


def recorded_spec(config_map: dict[str, Any]) -> GangSpec:
    """The spec an owner ConfigMap recorded (raises ``GangSpecError``/``KeyError`` if unusable)."""
    return GangSpec.from_dict(json.loads(config_map["data"][SPEC_KEY]))

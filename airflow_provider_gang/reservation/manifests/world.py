"""The world ConfigMap: the number of members that really run, told to them only once it is known.

Under Kueue partial admission (``reservation="kueue"`` and ``min_size < size``) the Job is created
for ``size`` members, but Kueue may admit fewer: it binary-searches down to the largest count ``>=
min_size`` that fits, records it in ``status.admission.podSetAssignments[].count`` and lowers the
Job's ``parallelism`` (and ``completions``) to it before unsuspending it (Kueue
``pkg/controller/jobframework``, ``pkg/controller/jobs/job/job_controller.go``, KEP-420). It does
not touch the pod template, so a size written into the env at creation would tell the admitted
members the requested size, and a DDP rendezvous waiting for ``WORLD_SIZE=4`` peers of which only 2
exist hangs until its timeout.

So for such a gang every size-dependent variable of the rank environment (``GANG_SIZE``,
``WORLD_SIZE``, ``PET_NNODES``, ``JAX_NUM_PROCESSES``; see ``rank_env``) is not a ``value`` but a
``valueFrom.configMapKeyRef`` to key :data:`SIZE_KEY` of the ConfigMap ``<gang>-world``, which the
operator writes only after Kueue admitted the Workload, with the admitted count
(``hooks.creation.publish_world``). Until it exists the kubelet cannot build the
container's environment: it reports the container ``Waiting`` with reason
``CreateContainerConfigError`` (``configmap "<name>" not found`` / ``couldn't find key size in
ConfigMap <ns>/<name>``, kubelet ``makeEnvironmentVariables`` in ``kubelet_pods.go``) and retries
the pod sync until it can; env from a ConfigMap is read once, when the container starts
(https://kubernetes.io/docs/concepts/configuration/configmap/#configmaps-and-pods). No member can
therefore start with a wrong size. ``members`` does not count that reason as fatal; the run's
``startup_timeout`` bounds the wait.

The ConfigMap is labelled like every object of the gang (teardown, withdrawal and ``on_kill`` find
it by the gang label; ConfigMaps are among every mode's kinds) and owned by the gang's owner
ConfigMap (deleting the owner garbage-collects it). With ``min_size == size`` (or unset) nothing of
this applies: the sizes are plain values, as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

SIZE_KEY = "size"
"""The key holding the admitted member count (a decimal string)."""
TOPOLOGY_KEY = "topology"
DOMAINS_KEY = "domains"
"""The keys holding a topology gang's label and its ranks' domains (module docstring)."""
NAME_SUFFIX = "-world"


def uses_world_config_map(spec: GangSpec) -> bool:
    """Whether ``spec``'s members read their size from the world ConfigMap: Kueue mode with partial
    admission allowed, the only case where the number of members is unknown when they are created."""
    return spec.mode is ReservationMode.KUEUE and spec.floor < spec.size


def world_config_map_name(spec: GangSpec) -> str:
    """``<gang>-world`` (a gang name ends with a hex hash, so no gang's owner can be named so)."""
    return f"{naming.GangNames(spec.name).owner}{NAME_SUFFIX}"


def size_reference(spec: GangSpec, variable: str) -> dict[str, Any]:
    """The env entry ``variable`` read from the world ConfigMap's :data:`SIZE_KEY` (not optional:
    the kubelet holds the container until the key exists)."""
    reference = {"name": world_config_map_name(spec), "key": SIZE_KEY}
    return {"name": variable, "valueFrom": {"configMapKeyRef": reference}}


def world_config_map(
    spec: GangSpec, *, size: int, owner_uid: str, domains: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """The world ConfigMap telling ``size`` (the admitted count, with partial admission) and the
    ``domains`` of the ranks (a gang with a topology) to the members of ``spec``."""
    data: dict[str, str] = {}
    if uses_world_config_map(spec):
        if not spec.floor <= size <= spec.size:
            raise ValueError(f"admitted size {size} is outside min_size..size ({spec.floor}..{spec.size})")
        data[SIZE_KEY] = str(size)
    if domains is not None and spec.topology_label is not None:
        data[TOPOLOGY_KEY] = spec.topology_label
        data[DOMAINS_KEY] = json.dumps({str(rank): domain for rank, domain in sorted(domains.items())})
    if not data:
        raise ValueError("world_config_map needs partial admission (kueue, min_size < size) or a topology's domains")
    metadata = common.metadata(spec, world_config_map_name(spec), common.ROLE_RENDEZVOUS, owner_uid)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def recorded_size(config_map: dict[str, Any]) -> int | None:
    """The size a world ConfigMap tells, or ``None`` when its key is missing or not a number."""
    value = (config_map.get("data") or {}).get(SIZE_KEY)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None

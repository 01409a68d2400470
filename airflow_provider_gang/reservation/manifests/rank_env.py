"""The environment that tells each member who it is and where its peers are.

Every member gets ``GANG_NAME``, ``GANG_RANK``, ``GANG_SIZE`` and ``GANG_ORIGINAL_SIZE`` (the size
before a fallback shrink, so training code can compensate, e.g. by gradient accumulation).

``distributed="torch"``: one process per member is the contract of ``RANK``/``WORLD_SIZE``/
``LOCAL_RANK`` (``torch.distributed.init_process_group(init_method="env://")`` reads them, with
``MASTER_ADDR``/``MASTER_PORT``); the ``PET_*`` variables configure ``torchrun`` (its ``--nnodes``,
``--node-rank``, ``--master-addr``, ``--master-port``, ``--nproc-per-node`` options read
``PET_<OPTION>``), which then sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` of its children itself.
``PET_NPROC_PER_NODE`` is the member's GPU count (1 without GPUs).

``distributed="jax"``: ``JAX_COORDINATOR_ADDRESS`` (``host:port``), ``JAX_NUM_PROCESSES``,
``JAX_PROCESS_ID`` (read by ``jax.distributed.initialize()``).

Rank 0 is addressable as ``<gang>-0.<service>`` (pod ``hostname`` + ``subdomain`` + headless
Service). When the rank is not known per pod (Kueue Job launch), rank variables read the Job's
completion index through the downward API and rank 0's host is ``<job>-0`` (Indexed Job hostnames).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.spec import Distributed, GangSpec

COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def rendezvous_host(spec: GangSpec) -> str:
    """DNS name of rank 0: ``<gang>-0.<service>.<namespace>.svc`` (works for pods and Indexed Jobs,
    since the Job is named like the gang)."""
    names = naming.GangNames(spec.name)
    return f"{names.member(0)}.{names.service}.{spec.namespace}.svc"


def _value(name: str, value: str | int) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def _rank(name: str, rank: int | None) -> dict[str, Any]:
    if rank is None:
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}}
    return _value(name, rank)


def rank_environment(spec: GangSpec, rank: int | None, *, master_address: str | None = None) -> list[dict[str, Any]]:
    """Env entries for member ``rank`` (``None``: from the Job completion index), in a stable order.

    ``master_address`` overrides the rank-0 host (e.g. ``127.0.0.1`` when members are local processes).
    """
    host = master_address or rendezvous_host(spec)
    port = spec.master_port
    env = [
        _value("GANG_NAME", spec.name),
        _rank("GANG_RANK", rank),
        _value("GANG_SIZE", spec.size),
        _value("GANG_ORIGINAL_SIZE", spec.size_before_shrink),
    ]
    if spec.distributed is Distributed.TORCH:
        env += [
            _value("MASTER_ADDR", host),
            _value("MASTER_PORT", port),
            _value("WORLD_SIZE", spec.size),
            _rank("RANK", rank),
            _value("LOCAL_RANK", 0),
            _value("PET_NNODES", spec.size),
            _rank("PET_NODE_RANK", rank),
            _value("PET_MASTER_ADDR", host),
            _value("PET_MASTER_PORT", port),
            _value("PET_NPROC_PER_NODE", max(spec.resources.gpus, 1)),
        ]
    elif spec.distributed is Distributed.JAX:
        env += [
            _value("JAX_COORDINATOR_ADDRESS", f"{host}:{port}"),
            _value("JAX_NUM_PROCESSES", spec.size),
            _rank("JAX_PROCESS_ID", rank),
        ]
    return env


def with_environment(container: dict[str, Any], env: list[dict[str, Any]]) -> dict[str, Any]:
    """``container`` with ``env`` set; the provider's variables replace same-named user ones."""
    ours = {entry["name"] for entry in env}
    kept = [entry for entry in container.get("env") or () if entry.get("name") not in ours]
    return {**container, "env": [*kept, *env]}

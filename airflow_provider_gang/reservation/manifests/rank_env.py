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

With a ``checkpoint``: ``GANG_CHECKPOINT_DIR``, ``GANG_TRY_NUMBER``, ``GANG_TERMINATION_MESSAGE_PATH``
and, when resuming, ``GANG_RESUME``/``GANG_RESUME_STEP`` (:mod:`reservation.checkpoint`).

Rank 0 is addressable as ``<gang>-0.<service>`` (pod ``hostname`` + ``subdomain`` + headless
Service). When the rank is not known per pod (Kueue Job launch), rank variables read the Job's
completion index through the downward API and rank 0's host is ``<job>-0`` (Indexed Job hostnames).

Size-dependent variables (:data:`SIZE_VARIABLES`: ``GANG_SIZE``, ``WORLD_SIZE``, ``PET_NNODES``,
``JAX_NUM_PROCESSES``) are the gang's ``size``, except when the number of members is decided after
they are created - Kueue partial admission (``reservation="kueue"``, ``min_size < size``) - where
they read the admitted count from the gang's world ConfigMap (``valueFrom.configMapKeyRef``); the
kubelet starts no container before it exists, so no member is told a size other than the number
that runs (:mod:`.world` explains the mechanism). ``GANG_ORIGINAL_SIZE`` stays the requested size, so
training code can still compensate for the members it did not get.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation import checkpoint, naming
from airflow_provider_gang.reservation.manifests import world
from airflow_provider_gang.reservation.spec import Distributed, GangSpec

COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
SIZE_VARIABLES = frozenset({"GANG_SIZE", "WORLD_SIZE", "PET_NNODES", "JAX_NUM_PROCESSES"})
"""The variables whose value is the number of members (see the module docstring)."""
PROVIDER_VARIABLES = frozenset(
    {"GANG_NAME", "GANG_RANK", "GANG_SIZE", "GANG_ORIGINAL_SIZE", *checkpoint.ENVIRONMENT_NAMES}
)
"""Every ``GANG_*`` variable the provider sets in a member, whatever the gang's options: a user ``env``
entry of the same name would be replaced or, for ``GANG_RESUME``, claim a checkpoint that no try
reported, so the operator refuses it at parse time (``reservation.tries.arguments``)."""


FRAMEWORK_VARIABLES: dict[Distributed, tuple[str, ...]] = {
    Distributed.TORCH: (
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "PET_NNODES",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
        "PET_NPROC_PER_NODE",
    ),
    Distributed.JAX: ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"),
}
"""The variables :func:`rank_environment` writes for each ``distributed`` framework, in its order: a
user ``env`` entry of the same name would be overwritten, so the operator refuses it at parse time
(``reservation.tries.arguments``). torchrun's ``PET_*`` names:
https://pytorch.org/docs/stable/elastic/run.html; JAX's: ``jax.distributed.initialize``."""


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


def _size(name: str, spec: GangSpec) -> dict[str, Any]:
    if world.uses_world_config_map(spec):
        return world.size_reference(spec, name)
    return _value(name, spec.size)


def rank_environment(spec: GangSpec, rank: int | None, *, master_address: str | None = None) -> list[dict[str, Any]]:
    """Env entries for member ``rank`` (``None``: from the Job completion index), in a stable order.

    ``master_address`` overrides the rank-0 host (e.g. ``127.0.0.1`` when members are local processes).
    """
    host = master_address or rendezvous_host(spec)
    port = spec.master_port
    env = [
        _value("GANG_NAME", spec.name),
        _rank("GANG_RANK", rank),
        _size("GANG_SIZE", spec),
        _value("GANG_ORIGINAL_SIZE", spec.size_before_shrink),
    ]
    if spec.distributed is Distributed.TORCH:
        env += [
            _value("MASTER_ADDR", host),
            _value("MASTER_PORT", port),
            _size("WORLD_SIZE", spec),
            _rank("RANK", rank),
            _value("LOCAL_RANK", 0),
            _size("PET_NNODES", spec),
            _rank("PET_NODE_RANK", rank),
            _value("PET_MASTER_ADDR", host),
            _value("PET_MASTER_PORT", port),
            _value("PET_NPROC_PER_NODE", max(spec.resources.gpus, 1)),
        ]
    elif spec.distributed is Distributed.JAX:
        env += [
            _value("JAX_COORDINATOR_ADDRESS", f"{host}:{port}"),
            _size("JAX_NUM_PROCESSES", spec),
            _rank("JAX_PROCESS_ID", rank),
        ]
    if spec.checkpoint is not None:
        trainer = spec.pod_template["spec"]["containers"][0]
        env += checkpoint.environment(spec.checkpoint, checkpoint.termination_message_path(trainer))
    return env


def with_environment(container: dict[str, Any], env: list[dict[str, Any]]) -> dict[str, Any]:
    """``container`` with ``env`` set; the provider's variables replace same-named user ones."""
    ours = {entry["name"] for entry in env}
    kept = [entry for entry in container.get("env") or () if entry.get("name") not in ours]
    return {**container, "env": [*kept, *env]}

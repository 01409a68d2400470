"""Which spot nodes of a gang are being shut down: read before a member failure of a spot gang is decided.

GKE reclaims a Spot VM with about 30 s of notice: it taints the node
``cloud.google.com/impending-node-termination`` and the kubelet's graceful node shutdown stops its
pods, then the node is deleted
(https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms#termination-graceful-shutdown).
Other clouds mark the node with other taints (Karpenter ``karpenter.sh/disrupted``, the AWS Node
Termination Handler ``aws-node-termination-handler/spot-itn``): the gang's cloud profile lists them
(``CloudProfile.preemption_taints``, :mod:`reservation.cloud`, passed as the trigger argument
``preemption_taints`` and kept in ``RunMemory.preemption_taints``); a node that is gone counts on
every cloud.
The preempted pod's own status says so only once its containers stopped (the kubelet's status
manager holds ``DisruptionTarget`` back meanwhile: ``mergePodStatus`` in
``pkg/kubelet/status/status_manager.go``), while a peer on another node fails as soon as the
rendezvous breaks. So before a spot gang's ``member_failed`` or ``member_lost`` is decided, the run
trigger reads the nodes its spot members ran on: a node with the taint, or gone, is shutting down
(``Observed.nodes_shutting_down``), and the decision waits for its members and ends
``spot_preempted`` instead.

The read needs ``get nodes`` (cluster-scoped, optional: ``deploy/rbac.yaml``). Without it, or when
the API server does not answer within the timeout, the caller decides on the pods alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Protocol

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import NODES
from airflow_provider_gang.reservation.member_history import RunMemory
from airflow_provider_gang.reservation.outcome import Decision
from airflow_provider_gang.reservation.phases import Reason


class WarningLog(Protocol):
    """What is logged to: a trigger's ``log``."""

    def warning(self, event: str, *args: Any) -> Any: ...


CHECKED_REASONS = frozenset({Reason.MEMBER_FAILED, Reason.MEMBER_LOST})
"""Decisions that a shutting-down spot node turns into ``spot_preempted``."""
READ_TIMEOUT_SECONDS = 10.0
"""Longest wait for the node reads of one check."""


def has_termination_taint(node: dict[str, Any], taint_keys: Iterable[str]) -> bool:
    """``node`` carries a taint (any effect) whose key is one of ``taint_keys``."""
    keys = frozenset(taint_keys)
    taints = (node.get("spec") or {}).get("taints") or ()
    return any(isinstance(taint, dict) and taint.get("key") in keys for taint in taints)


async def nodes_shutting_down(
    client: KubeClient, names: Iterable[str], *, taint_keys: Iterable[str], timeout: float = READ_TIMEOUT_SECONDS
) -> frozenset[str]:
    """The nodes among ``names`` that carry a taint of ``taint_keys`` or are gone (404).

    Raises :class:`kube.errors.KubeError` (e.g. Forbidden without ``get nodes``) or
    :class:`asyncio.TimeoutError` after ``timeout`` seconds; the caller then decides without them.
    """

    async def shutting_down(name: str) -> bool:
        try:
            return has_termination_taint(await client.get(NODES, name), keys)
        except errors.NotFound:
            return True

    keys = tuple(taint_keys)
    ordered = sorted(set(names))
    found = await asyncio.wait_for(asyncio.gather(*(shutting_down(name) for name in ordered)), timeout=timeout)
    return frozenset(name for name, shutting in zip(ordered, found, strict=True) if shutting)


async def found_shutting_down(
    decision: Decision, memory: RunMemory, client: KubeClient, log: WarningLog, gang_name: str
) -> bool:
    """Before ``decision`` (terminal, one of :data:`CHECKED_REASONS`) ends a spot gang's run: read the
    spot nodes ``memory`` knows and does not yet know to be shutting down; record those that are and
    say whether any was (then the caller decides again). A failed read is logged and changes nothing."""
    if not (decision.terminal and decision.reason in CHECKED_REASONS):
        return False
    unknown = set(memory.spot_nodes.values()) - memory.nodes_shutting_down
    if not unknown:
        return False
    try:
        found = await nodes_shutting_down(client, unknown, taint_keys=memory.preemption_taints)
    except (errors.KubeError, asyncio.TimeoutError) as error:
        log.warning(
            "Gang %s: could not read its spot nodes %s before deciding (%s: grant get nodes, "
            "deploy/rbac.yaml); deciding on the pods alone",
            gang_name,
            sorted(unknown),
            error or "timeout",
        )
        return False
    memory.saw_nodes_shutting_down(found)
    return bool(found)

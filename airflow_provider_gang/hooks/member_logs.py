"""The members' logs: the tails the operator copies into the task log, and the tails a run wait
saves before it stops the survivors of a checkpointed gang.

Logs are read through the pod ``log`` subresource with ``tailLines``
(https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#get-read-log-of-the-specified-pod),
the first container's, as ``kubectl logs`` does by default. A pod's log goes with the pod: once a
drain's graceful deletion has removed a member (``triggers.survivors``), only what was read before
is left - so the run wait reads the log ranks' tails first and carries them in its event
(``GangEvent.logs``), and :func:`read_logs` falls back on those for a rank whose pod is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import NODES, PODS
from airflow_provider_gang.reservation import manifests, members
from airflow_provider_gang.reservation.spec import GangSpec

LOG_TAIL_LINES = 2000
"""Lines of each copied log (the end of it: a trainer's final metrics)."""
LOG_READ_TIMEOUT = 30.0
SAVED_LOG_BYTES = 32 * 1024
"""At most this much of the end of each saved tail: the event crosses Airflow's database
(``TaskInstance.next_kwargs``), so ``log_ranks="all"`` on a large gang must stay small."""
SAVED_LOG_TAIL_LINES = 500


async def _ranked_pods(client: KubeClient, namespace: str, pod_selector: str) -> dict[int, str]:
    pods, _ = await client.list(PODS, namespace, label_selector=pod_selector)
    ranked = {members.member_rank(pod): str(pod["metadata"]["name"]) for pod in pods}
    return {rank: name for rank, name in ranked.items() if rank is not None}


async def _tail(client: KubeClient, namespace: str, name: str, lines: int) -> str:
    """The last ``lines`` lines of pod ``name``'s log; raises ``KubeError`` or ``TimeoutError``."""
    path = PODS.path(namespace, name, "log")
    async with client.open_stream(path, {"tailLines": str(lines)}, read_timeout=LOG_READ_TIMEOUT) as stream:
        raw = await asyncio.wait_for(stream.read(), timeout=LOG_READ_TIMEOUT)
    return raw.decode("utf-8", errors="replace")


async def save_tails(client: KubeClient, namespace: str, pod_selector: str, ranks: Iterable[int]) -> dict[int, str]:
    """The tails of ``ranks``' logs that can be read now, each cut to its last ``SAVED_LOG_BYTES``;
    a rank without a pod or whose log cannot be read is left out (best effort: the drain that
    follows must not wait on it). Raises ``KubeError`` when the members cannot be listed."""
    wanted = set(ranks)
    by_rank = await _ranked_pods(client, namespace, pod_selector)

    async def one(rank: int, name: str) -> tuple[int, str] | None:
        try:
            text = await _tail(client, namespace, name, SAVED_LOG_TAIL_LINES)
        except (errors.KubeError, TimeoutError):
            return None
        cut = text.encode("utf-8")[-SAVED_LOG_BYTES:].decode("utf-8", errors="ignore")
        return rank, cut

    found = await asyncio.gather(*(one(rank, name) for rank, name in by_rank.items() if rank in wanted))
    return dict(item for item in found if item is not None)


async def read_logs(
    client: KubeClient,
    spec: GangSpec,
    ranks: Iterable[int],
    *,
    nodes: Mapping[int, str] | None = None,
    saved: Mapping[int, str] | None = None,
) -> tuple[dict[int, str], list[str]]:
    """The last ``LOG_TAIL_LINES`` lines of each wanted rank's first container, and a note for every
    wanted rank without a pod (:func:`reservation.members.missing_log_note`): "its node was removed"
    when ``nodes`` (each rank's last node, from the run event) names a node that is gone (404), else
    "its pod was removed" (also when the node cannot be read: ``get nodes`` is optional). A rank
    without a pod whose tail the run wait saved (``saved``, from ``GangEvent.logs``) gets that tail,
    after a line that says so, and no note."""
    wanted = set(ranks)
    by_rank = await _ranked_pods(client, spec.namespace, manifests.common.member_selector(spec))

    async def one(rank: int, name: str) -> tuple[int, str]:
        try:
            return rank, await _tail(client, spec.namespace, name, LOG_TAIL_LINES)
        except (errors.KubeError, TimeoutError) as error:
            return rank, f"(log unavailable: {error})"

    async def node_removed(rank: int) -> bool:
        node = (nodes or {}).get(rank)
        if not node:
            return False
        try:
            await asyncio.wait_for(client.get(NODES, node), timeout=LOG_READ_TIMEOUT)
        except errors.NotFound:
            return True
        except (errors.KubeError, TimeoutError):
            return False
        return False

    found = [(rank, name) for rank, name in by_rank.items() if rank in wanted]
    logs = dict(await asyncio.gather(*(one(rank, name) for rank, name in found)))
    missing = sorted(wanted - logs.keys())
    for rank in [rank for rank in missing if rank in (saved or {})]:
        logs[rank] = f"(rank {rank}: read before its pod was removed)\n" + (saved or {})[rank]
    missing = [rank for rank in missing if rank not in logs]
    removed = await asyncio.gather(*(node_removed(rank) for rank in missing))
    notes = [members.missing_log_note(rank, node_removed=gone) for rank, gone in zip(missing, removed, strict=True)]
    return logs, notes

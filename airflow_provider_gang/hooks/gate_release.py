"""Release a gates-mode gang: remove the gang's scheduling gate from every member pod, together.

Each pod gets a JSON patch ``test`` + ``remove`` at the gate's index
(:func:`airflow_provider_gang.reservation.manifests.pods.release_gate_patch`), so a concurrent
change of the gate list (Kueue removing its own gate) fails the patch instead of removing the wrong
entry. A failed ``test`` or a ``remove`` at an index that no longer exists is answered
``422 Invalid`` by kube-apiserver (``k8s.io/apiserver/pkg/endpoints/handlers/patch.go``,
``jsonPatcher.applyJSPatch``) - also when the client retries a patch that did take effect and only
its answer was lost. So a 422 is never taken as final: the pod is read again and the patch computed
again from what it holds now; a gate already gone is done. Releasing is idempotent.

Scheduling gates can only be removed after creation (KEP-3521,
https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from airflow_provider_gang.hooks import parallel
from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient, PatchType
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.reservation import manifests, members, naming
from airflow_provider_gang.reservation.spec import GangSpec


async def release_gates(
    client: KubeClient, spec: GangSpec, *, host_of: Callable[[int], str | None] = lambda rank: None
) -> int:
    """Remove the gang's gate from every member of ``spec`` that still has it,
    ``client.max_parallel_requests`` at a time (the first release failing past its retries stops the
    others from starting, and is raised); ``host_of(rank)``: the ``kubernetes.io/hostname`` a member
    gains in its node selector with the release (a topology gang, ``reservation.topology.ranks``).
    Returns how many members held the gate when listed."""
    gate = naming.GangNames(spec.name).scheduling_gate
    pods, _ = await client.list(PODS, spec.namespace, label_selector=manifests.common.member_selector(spec))
    gated = [pod for pod in pods if manifests.pods.release_gate_patch(pod, gate)]
    releases = [
        functools.partial(release_gate, client, pod, gate, spec.namespace, host=_host(pod, host_of)) for pod in gated
    ]
    await parallel.bounded_gather(releases, limit=client.max_parallel_requests)
    return len(gated)


def _host(pod: dict[str, Any], host_of: Callable[[int], str | None]) -> str | None:
    rank = members.member_rank(pod)
    return None if rank is None else host_of(rank)


async def release_gate(
    client: KubeClient, pod: dict[str, Any], gate: str, namespace: str, *, host: str | None = None
) -> bool:
    """Remove ``gate`` from ``pod`` (as last read), pinning it to ``host`` in the same patch; ``False``
    if the gate was already gone.

    On ``422 Invalid`` (the guarded patch no longer applies: the list changed, or an earlier attempt
    of this very patch took effect with its answer lost) the pod is read again and released from
    what it holds now, once; a second 422 is raised (the list keeps changing under us)."""
    name = str(pod["metadata"]["name"])
    patch = manifests.pods.release_gate_patch(pod, gate, host=host)
    if not patch:
        return False
    try:
        await client.patch(PODS, name, patch, patch_type=PatchType.JSON, namespace=namespace)
        return True
    except errors.Invalid:
        current = await client.get(PODS, name, namespace)
    patch = manifests.pods.release_gate_patch(current, gate, host=host)
    if not patch:
        return False
    await client.patch(PODS, name, patch, patch_type=PatchType.JSON, namespace=namespace)
    return True

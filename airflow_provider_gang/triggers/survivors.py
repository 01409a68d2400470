"""Before a run ends: stop the members still running, give them their grace period, read their reports.

When the run trigger decides a gang's try is over while some members still run (a peer's spot node
reclaimed, a member failed, the run deadline), those survivors may hold progress newer than any
checkpoint reported so far - with one member per node, a reclaimed node is rarely rank 0's. So,
for a gang with a ``checkpoint``, before the event is sent (and the try recorded):

1. the tails of the survivors among the log ranks (``TriggerArguments.log_ranks``) are read
   (:func:`hooks.member_logs.save_tails`, best effort, bounded by ``LOG_READ_TIMEOUT``): a stopped
   pod's log goes with it, before the operator copies logs. They travel in the event
   (``GangEvent.logs``);
2. a watch on the members is opened (LIST first, so no event after the deletes is missed);
3. every survivor is deleted with its own grace period (no ``gracePeriodSeconds``: the pod's
   ``terminationGracePeriodSeconds``, default 30 s) and the precondition of its uid, so a pod that
   replaced it is not touched. The kubelet sends SIGTERM, waits the grace period, then SIGKILL, and
   writes the terminated container statuses - with the termination message the trainer wrote on
   SIGTERM - before it removes the pod
   (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination);
4. every state the watch shows of a member is read for its checkpoint report
   (:func:`reservation.checkpoint.report_of_pod`; the newest kept in ``RunMemory.checkpoint``) until
   every survivor is terminated or gone, or until the longest grace period plus
   :data:`MARGIN_SECONDS` has passed. Then the trigger gives up waiting: what was read is recorded,
   and the operator's teardown deletes what is left (the delete is already under way).

A failed delete or watch is logged and ends the wait with what was read; it never changes the decision.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from airflow_provider_gang.hooks import member_logs
from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.watch import Reflector
from airflow_provider_gang.reservation import checkpoint, members
from airflow_provider_gang.reservation.member_history import RunMemory

MARGIN_SECONDS = 15.0
"""Waited beyond the longest grace period: the kubelet's status write and the watch's delivery."""
DEFAULT_GRACE_SECONDS = 30
"""``v1.PodSpec.terminationGracePeriodSeconds`` when a pod does not set it."""
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class Log(Protocol):
    """What is logged to: a trigger's ``log``."""

    def info(self, event: str, *args: Any) -> Any: ...

    def warning(self, event: str, *args: Any) -> Any: ...


async def save_tails(
    client: KubeClient,
    namespace: str,
    pod_selector: str,
    ranks: Sequence[int],
    log: Log,
    gang_name: str,
    *,
    why: str,
) -> dict[int, str]:
    """The tails of ``ranks``' logs that can be read now (:func:`hooks.member_logs.save_tails`), best
    effort within ``LOG_READ_TIMEOUT``: a failure is logged (saying ``why`` they were read) and gives
    what was read, or nothing. Also used when a run on a Kueue MultiKueue worker ends, whose copies
    MultiKueue deletes - pods and logs with them - as soon as the manager learns the gang finished."""
    if not ranks:
        return {}
    try:
        return await asyncio.wait_for(
            member_logs.save_tails(client, namespace, pod_selector, ranks), timeout=member_logs.LOG_READ_TIMEOUT
        )
    except (errors.KubeError, TimeoutError) as error:
        log.warning("Gang %s: could not read the logs of ranks %s %s (%s)", gang_name, list(ranks), why, error)
        return {}


class EndedTails:
    """The log ranks' tails of a run on a Kueue MultiKueue worker, read as soon as each such member is
    seen ended (Succeeded or Failed), and the rest when the run ends: MultiKueue deletes its copies on
    the worker - pods and logs with them - once the manager learns the gang finished, which may be
    before the operator reads logs. ``saved`` goes into the event (``GangEvent.logs``)."""

    def __init__(self, namespace: str, pod_selector: str, ranks: Sequence[int], log: Log, gang_name: str) -> None:
        self.namespace, self.pod_selector, self.ranks = namespace, pod_selector, tuple(ranks)
        self.log, self.gang_name = log, gang_name
        self.saved: dict[int, str] = {}

    async def read(self, client: KubeClient, pods: Iterable[Mapping[str, Any]], *, at_end: bool = False) -> None:
        """Read the tails of the wanted ranks whose pod in ``pods`` ended (every wanted rank ``at_end``)
        and not read yet."""
        ended = {
            members.member_rank(pod)
            for pod in pods
            if at_end or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
        }
        wanted = [rank for rank in self.ranks if rank in ended and rank not in self.saved]
        if wanted:
            why = "before MultiKueue removes them"
            self.saved.update(
                await save_tails(client, self.namespace, self.pod_selector, wanted, self.log, self.gang_name, why=why)
            )


def survivors(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The member pods that have not reached a terminal phase."""
    return [pod for pod in pods if (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES]


def wait_seconds(pods: Iterable[Mapping[str, Any]], margin: float = MARGIN_SECONDS) -> float:
    """The longest grace period among ``pods`` (the marked one if being deleted) plus ``margin``."""
    graces = [grace_seconds(pod) for pod in pods]
    return max(graces, default=0) + margin


def grace_seconds(pod: Mapping[str, Any]) -> int:
    """The grace period ``pod`` gets: the one it was marked with, else its spec's, else 30 s."""
    marked = (pod.get("metadata") or {}).get("deletionGracePeriodSeconds")
    if isinstance(marked, int):
        return marked
    spec = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return spec if isinstance(spec, int) else DEFAULT_GRACE_SECONDS


class Drain:
    """One drain of the survivors of a run (module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        pod_selector: str,
        memory: RunMemory,
        log: Log,
        gang_name: str,
        *,
        log_ranks: Sequence[int] = (),
        margin: float = MARGIN_SECONDS,
    ) -> None:
        self.client, self.namespace, self.pod_selector = client, namespace, pod_selector
        self.memory, self.log, self.gang_name, self.margin = memory, log, gang_name, margin
        self.log_ranks = frozenset(log_ranks)
        self.pending: dict[str, int | None] = {}
        """uid -> rank of the survivors not yet seen terminated or gone."""
        self.saved_logs: dict[int, str] = {}
        """rank -> the tail of its log, read before it was stopped (log ranks among the survivors)."""

    async def run(self, pods: Sequence[Mapping[str, Any]]) -> None:
        """Delete the survivors among ``pods`` gracefully and read their reports (see module docstring)."""
        alive = survivors(pods)
        if not alive:
            return
        self.pending = {str(pod["metadata"]["uid"]): members.member_rank(pod) for pod in alive}
        budget = wait_seconds(alive, self.margin)
        ranks = sorted(rank for rank in self.pending.values() if rank is not None)
        await self._save_logs([rank for rank in ranks if rank in self.log_ranks])
        self.log.info(
            "Gang %s: stopping ranks %s (SIGTERM and their grace period) to read their checkpoint reports",
            self.gang_name,
            ranks,
        )
        try:
            await asyncio.wait_for(self._follow(alive), timeout=budget)
        except asyncio.TimeoutError:
            left = sorted(rank for rank in self.pending.values() if rank is not None)
            self.log.warning(
                "Gang %s: ranks %s did not stop within %.0f s (grace period + %.0f s); recording the "
                "checkpoint reports read so far",
                self.gang_name,
                left,
                budget,
                self.margin,
            )
        except errors.KubeError as error:
            self.log.warning(
                "Gang %s: could not stop or follow its running members (%s); recording the checkpoint "
                "reports read so far",
                self.gang_name,
                error,
            )

    async def _save_logs(self, ranks: Sequence[int]) -> None:
        self.saved_logs = await save_tails(
            self.client, self.namespace, self.pod_selector, ranks, self.log, self.gang_name, why="before stopping them"
        )

    async def _follow(self, alive: Sequence[Mapping[str, Any]]) -> None:
        reflector = Reflector(self.client, PODS, self.namespace, label_selector=self.pod_selector)
        deleted = False
        async with contextlib.aclosing(reflector.changes()) as changes:
            async for change in changes:
                seen = list(reflector.objects.values())
                old = getattr(change, "old", None)
                if old is not None:
                    seen.append(old)
                self._read(seen, present={str(pod["metadata"].get("uid")) for pod in reflector.objects.values()})
                if not deleted:
                    deleted = True
                    await self._delete(alive)
                if not self.pending:
                    return

    async def _delete(self, alive: Sequence[Mapping[str, Any]]) -> None:
        for pod in alive:
            metadata = pod["metadata"]
            if str(metadata["uid"]) not in self.pending:
                continue
            with contextlib.suppress(errors.Conflict):  # replaced since: not ours to stop
                await self.client.delete(
                    PODS, str(metadata["name"]), self.namespace, preconditions={"uid": str(metadata["uid"])}
                )

    def _read(self, pods: Iterable[Mapping[str, Any]], *, present: set[str]) -> None:
        for pod in pods:
            report, problem = checkpoint.report_of_pod(pod, members.member_rank(pod))
            self.memory.checkpoint = checkpoint.latest([self.memory.checkpoint, report])
            if problem is not None and problem not in self.memory.warned:
                self.memory.warned |= {problem}
                self.log.warning("Gang %s: %s", self.gang_name, problem)
            uid = str((pod.get("metadata") or {}).get("uid"))
            if uid in self.pending and (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                del self.pending[uid]
        for uid in [uid for uid in self.pending if uid not in present]:
            del self.pending[uid]  # gone: its last state (if the watch saw it) was read above

"""Before a run ends: stop the members still running, give them their grace period, read their reports.

When the run trigger decides a gang's try is over while some members still run (a peer's spot node
reclaimed, a member failed, the run deadline), those survivors may hold progress newer than any
checkpoint reported so far - with one member per node, a reclaimed node is rarely rank 0's. So,
for a gang with a ``checkpoint``, before the event is sent (and the try recorded):

1. the tails of the survivors among the log ranks (``TriggerArguments.log_ranks``) are read
   (:func:`hooks.member_logs.save_tails`, best effort, bounded by ``LOG_READ_TIMEOUT``): a stopped
   pod's log goes with it, before the operator copies logs. They travel in the event
   (``GangEvent.logs``);
2. a :class:`kube.watch.Reflector` LISTs the members (the watch then resumes from that LIST, so no
   event after the deletes is missed; the LIST is bounded by the wait of step 4); a survivor the
   LIST no longer shows is gone already;
3. every survivor is deleted - all at once, each with the client's retries - with its own grace
   period (no ``gracePeriodSeconds``: the pod's ``terminationGracePeriodSeconds``, default 30 s) and
   the precondition of its uid, so a pod that replaced it is not touched. The API server only marks
   a pod bound to a node (``deletionTimestamp``); its kubelet sends SIGTERM, waits the grace period,
   then SIGKILL, and writes the terminated container statuses - with the termination message the
   trainer wrote on SIGTERM - before it deletes the pod with grace period 0
   (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination);
4. every state the watch shows of a member - the one its ``DELETED`` event carries too - is read for
   its checkpoint report (:func:`reservation.checkpoint.report_of_pod`; the newest kept in
   ``RunMemory.checkpoint``) until every survivor is seen terminated or gone, or until the longest
   grace period plus :data:`MARGIN_SECONDS` has passed since the deletes, in ``reservation.clock``'s
   time (:func:`within`). The watch resumes after a cut and relists after ``410 Gone``, as the
   reflector does.

A survivor whose report could not be read is recorded with why
(:class:`reservation.unread_reports.UnreadReport`): in the trigger's log, in the event
(``GangEvent.unread_reports``) and so in the try's record, and the next try's plan line names it - a
try that starts afresh, or from an older checkpoint, says so. The causes
(:class:`reservation.unread_reports.ReportGap`):

- ``delete_failed``: its delete failed past the client's retries (it runs until the operator's
  teardown deletes the gang, and nobody reads its report);
- ``watch_failed``: the members could not be listed within the wait, or the watch failed for good
  (a non-retryable error);
- ``not_seen_stopped``: no terminated state of it arrived within the wait (a kubelet slower than its
  grace period, or a watch that kept failing: the log names the watch's last error);
- ``gone_unseen``: it was removed before its terminated state was seen (force-deleted, its node
  removed, or no longer listed when the watch had to start over after ``410 Gone``).

A member that ignored SIGTERM is killed when its grace period ends (exit code 137); that is logged,
and its report is the last one it wrote before. The drain changes no decision; the operator's
teardown deletes whatever is left (a member not seen stopped is still being deleted).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_gang.hooks import member_logs
from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.watch import Change, Listed, Reflector
from airflow_provider_gang.reservation import checkpoint, members
from airflow_provider_gang.reservation import clock as reservation_clock
from airflow_provider_gang.reservation.checkpoint import CheckpointReport
from airflow_provider_gang.reservation.member_history import RunMemory
from airflow_provider_gang.reservation.tries.results import describe_ranks
from airflow_provider_gang.reservation.unread_reports import ReportGap, UnreadReport

MARGIN_SECONDS = 15.0
"""Waited beyond the longest grace period: the kubelet's status write and the watch's delivery."""
DEFAULT_GRACE_SECONDS = 30
"""``v1.PodSpec.terminationGracePeriodSeconds`` when a pod does not set it."""
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
KILLED_EXIT_CODE = 137
"""128 + SIGKILL: what a container killed at the end of its grace period exits with."""


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


@dataclass(frozen=True)
class RunEnd:
    """What the end of a run read for its event (``GangEvent.logs`` and ``unread_reports``)."""

    logs: tuple[tuple[int, str], ...]
    """(rank, the tail of its log), by rank."""
    unread: tuple[UnreadReport, ...]
    """The survivors whose report could not be read, and why, by rank."""


async def end_run(
    client: KubeClient,
    pods: Sequence[Mapping[str, Any]],
    memory: RunMemory,
    log: Log,
    gang_name: str,
    *,
    namespace: str,
    pod_selector: str | None,
    log_ranks: Sequence[int],
    ended_tails: EndedTails | None,
) -> RunEnd:
    """Before a run's event: a checkpointed gang's survivors among ``pods`` stopped and their reports
    read into ``memory`` (:class:`Drain`; not without a ``pod_selector``), then the log ranks' tails a
    MultiKueue worker's run has not read yet (``ended_tails``); a tail the drain read wins."""
    drain = Drain(client, namespace, pod_selector or "", memory, log, gang_name, log_ranks=log_ranks)
    if memory.read_checkpoints and pod_selector:
        await drain.run(pods)
    saved = dict(drain.saved_logs)
    if ended_tails is not None:
        await ended_tails.read(client, pods, at_end=True)
        saved = {**ended_tails.saved, **saved}
    return RunEnd(logs=tuple(sorted(saved.items())), unread=tuple(drain.unread))


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


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _killed(pod: Mapping[str, Any]) -> bool:
    """A container of ``pod`` was killed (exit code 137) other than for running out of memory."""
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        terminated = (status.get("state") or {}).get("terminated") or {}
        if terminated.get("exitCode") == KILLED_EXIT_CODE and terminated.get("reason") != "OOMKilled":
            return True
    return False


async def within(seconds: float, work: Awaitable[None]) -> None:
    """Await ``work`` for at most ``seconds`` of ``reservation.clock`` (the time the trigger's
    deadlines are in, which a test may run on the cluster's clock); raise ``TimeoutError`` then."""
    clock = reservation_clock.current()
    deadline = clock.now() + seconds
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            left = deadline - clock.now()
            if left <= 0:
                raise TimeoutError
            await asyncio.wait({task}, timeout=clock.real_seconds(left))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    task.result()


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
        self.reports: dict[int | None, CheckpointReport] = {}
        """rank -> the report in the terminated state of a survivor (survivors that reported one)."""
        self.stopped: list[int | None] = []
        """Ranks of the survivors seen terminated."""
        self.killed: list[int | None] = []
        """Ranks of survivors killed at the end of their grace period (exit code 137)."""
        self.unread: list[UnreadReport] = []
        """The survivors whose report could not be read, and why (module docstring), by rank."""

    async def run(self, pods: Sequence[Mapping[str, Any]]) -> None:
        """Delete the survivors among ``pods`` gracefully and read their reports (see module docstring)."""
        alive = survivors(pods)
        if not alive:
            return
        self.pending = {_uid(pod): members.member_rank(pod) for pod in alive}
        ranks = sorted(rank for rank in self.pending.values() if rank is not None)
        await self._save_logs([rank for rank in ranks if rank in self.log_ranks])
        self.log.info(
            "Gang %s: stopping ranks %s (SIGTERM and their grace period) to read their checkpoint reports",
            self.gang_name,
            ranks,
        )
        reflector = Reflector(self.client, PODS, self.namespace, label_selector=self.pod_selector, on_retry=self._retry)
        budget = wait_seconds(alive, self.margin)
        started_at = reservation_clock.current().now()
        try:
            async with contextlib.aclosing(reflector.changes()) as changes:
                await within(budget, self._listed(changes, reflector))
                await self._delete(alive)
                await within(budget, self._until_stopped(changes, reflector))
        except TimeoutError:
            self._timed_out(reflector, budget)
        except errors.KubeError as error:
            self._lose_pending(ReportGap.WATCH_FAILED, str(error))
        self.unread.sort(key=lambda item: _order(item.rank))  # the deletes ran concurrently
        self._log_outcome(reflector, reservation_clock.current().now() - started_at)

    async def _save_logs(self, ranks: Sequence[int]) -> None:
        self.saved_logs = await save_tails(
            self.client, self.namespace, self.pod_selector, ranks, self.log, self.gang_name, why="before stopping them"
        )

    def _retry(self, reflector: Reflector, error: errors.KubeError, delay: float) -> None:
        self.log.warning(
            "Gang %s: the watch of its stopping members failed (%s); retrying in %.1f s", self.gang_name, error, delay
        )

    async def _listed(self, changes: AsyncIterator[Change], reflector: Reflector) -> None:
        """The first LIST: read every member; a survivor it does not show is gone already."""
        await anext(changes)
        self._read(reflector.objects.values())
        self._lose_absent(reflector, "gone before it could be stopped")

    async def _delete(self, alive: Sequence[Mapping[str, Any]]) -> None:
        """Delete every survivor still pending, all at once (each with the client's retries)."""
        await asyncio.gather(*(self._delete_one(pod) for pod in alive if _uid(pod) in self.pending))

    async def _delete_one(self, pod: Mapping[str, Any]) -> None:
        uid, name = _uid(pod), str(pod["metadata"]["name"])
        try:
            found = await self.client.delete(PODS, name, self.namespace, preconditions={"uid": uid})
        except errors.Conflict:  # a pod of the same name replaced it: ours is gone
            found = False
        except errors.KubeError as error:
            self._lose(uid, ReportGap.DELETE_FAILED, str(error))
            return
        if not found:
            self._lose(uid, ReportGap.GONE_UNSEEN, "gone before it could be stopped")

    async def _until_stopped(self, changes: AsyncIterator[Change], reflector: Reflector) -> None:
        """Read every change until no survivor is pending."""
        while self.pending:
            change = await anext(changes)
            if isinstance(change, Listed):  # the watch started over (410 Gone): what it no longer lists is gone
                self._read(reflector.objects.values())
                self._lose_absent(reflector, "no longer listed when its watch had to start over (410 Gone)")
                continue
            self._read(state for state in (change.new, change.final) if state is not None)
            gone = change.final or change.old
            if change.new is None and gone is not None:
                self._lose(_uid(gone), ReportGap.GONE_UNSEEN, "removed before its terminated state was seen")

    def _read(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """Keep the newest report of ``pods``; a survivor in a terminal phase is done."""
        for pod in pods:
            rank = members.member_rank(pod)
            report, problem = checkpoint.report_of_pod(pod, rank)
            self.memory.checkpoint = checkpoint.latest([self.memory.checkpoint, report])
            if problem is not None and problem not in self.memory.warned:
                self.memory.warned |= {problem}
                self.log.warning("Gang %s: %s", self.gang_name, problem)
            uid = _uid(pod)
            if uid in self.pending and (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                del self.pending[uid]
                self.stopped.append(rank)
                if report is not None:
                    self.reports[rank] = report
                if _killed(pod):
                    self.killed.append(rank)

    def _lose(self, uid: str, gap: ReportGap, detail: str) -> None:
        """Survivor ``uid`` is done without a terminated state: record why its report is unread."""
        if uid in self.pending:
            self.unread.append(UnreadReport(rank=self.pending.pop(uid), gap=gap, detail=detail))

    def _lose_absent(self, reflector: Reflector, detail: str) -> None:
        present = {_uid(pod) for pod in reflector.objects.values()}
        for uid in [uid for uid in self.pending if uid not in present]:
            self._lose(uid, ReportGap.GONE_UNSEEN, detail)

    def _lose_pending(self, gap: ReportGap, detail: str) -> None:
        for uid in list(self.pending):
            self._lose(uid, gap, detail)

    def _timed_out(self, reflector: Reflector, budget: float) -> None:
        error = "" if reflector.last_error is None else f"; the watch last failed with: {reflector.last_error}"
        if reflector.stats.lists == 0:
            self._lose_pending(ReportGap.WATCH_FAILED, f"no LIST answered within {budget:g} s{error}")
            return
        waited = f"waited {budget:g} s: the longest grace period {budget - self.margin:g} s + {self.margin:g} s"
        self._lose_pending(ReportGap.NOT_SEEN_STOPPED, waited + error)

    def _log_outcome(self, reflector: Reflector, seconds: float) -> None:
        resumed = reflector.stats.reconnects + reflector.stats.relists
        self.log.info(
            "Gang %s: ranks %s stopped after %s; checkpoint reports read: %s%s",
            self.gang_name,
            sorted(self.stopped, key=_order),
            f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s",
            describe_reports(self.reports) or "none",
            f" (the watch of the stopping members resumed {resumed} times)" if resumed else "",
        )
        if self.killed:
            self.log.warning(
                "Gang %s: ranks %s did not stop on SIGTERM and were killed when their grace period ended "
                "(exit code %d); a report of theirs is the last they wrote before",
                self.gang_name,
                sorted(self.killed, key=_order),
                KILLED_EXIT_CODE,
            )
        for unread in self.unread:
            self.log.warning("Gang %s: %s", self.gang_name, unread.describe())


def describe_reports(reports: Mapping[int | None, CheckpointReport]) -> str:
    """``"rank 0 saved step 10 (it had done step 12); ranks 1-7 saved step 0 (they had done step 12)"``:
    the ranks that reported the same step and progress together, in the order of their lowest rank
    (members without a rank last)."""
    groups: dict[tuple[int, int], list[int | None]] = {}
    for rank, report in sorted(reports.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        groups.setdefault((report.step, report.progress), []).append(rank)
    return "; ".join(
        f"{_who(ranks)} saved step {step} ({'they' if len(ranks) > 1 else 'it'} had done step {progress})"
        for (step, progress), ranks in groups.items()
    )


def _who(ranks: Sequence[int | None]) -> str:
    known = [rank for rank in ranks if rank is not None]
    unranked = len(ranks) - len(known)
    named = [describe_ranks(known)] if known else []
    if unranked:
        named.append(f"{unranked} member{'s' if unranked > 1 else ''} without a rank")
    return " and ".join(named)


def _order(rank: int | None) -> int:
    return -1 if rank is None else rank

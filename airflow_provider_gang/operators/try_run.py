"""``TryRun``: one entry point's part of a try - its cluster access, its state, and its one ending.

Every stage (``operators.starting``, ``operators.launching``) works through a ``TryRun``: it reads
and writes the try's state through ``operators.lifecycle``, talks to the cluster through the hooks
(:meth:`TryRun.cluster`: a fresh client on a private event loop, as operators are synchronous; the
cluster is the one the try's plan names - an ``OtherCluster`` step's connection, else the
operator's - or any other connection asked for by id), and
ends the try through :meth:`TryRun.end` - logs, teardown, record, summary or typed exception - or
:meth:`TryRun.end_with` after an exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from airflow_provider_gang.airflow_compat import AirflowTaskTerminated
from airflow_provider_gang.hooks import deletion, inspection, member_logs, topology_reads
from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.links import GANG_SUMMARY_XCOM_KEY
from airflow_provider_gang.member import function_call
from airflow_provider_gang.operators.failures import failure
from airflow_provider_gang.operators.lifecycle import TryLifecycle
from airflow_provider_gang.operators.settings import TrySettings
from airflow_provider_gang.operators.try_history import store_for
from airflow_provider_gang.operators.waiting import Waiter
from airflow_provider_gang.reservation import clock, cost, multikueue
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.events import GangEvent
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from airflow_provider_gang.reservation.records.triggers import TriggerArguments
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.tries import results
from airflow_provider_gang.reservation.tries.results import TryEnding

T = TypeVar("T")


@dataclass(frozen=True)
class ReturnValue:
    """Rank 0's return value (``None`` is a value too)."""

    value: Any


KILLED = TryEnding.failed(Reason.KILLED, "on_kill deleted the gang")
"""How a try ends once ``on_kill`` ran, whatever the trigger saw of the deletion."""


class TryRun:
    """One entry point's part of a try (see the module docstring)."""

    def __init__(self, settings: TrySettings, waiter: Waiter, context: Mapping[str, Any]) -> None:
        self.settings, self.waiter, self.context = settings, waiter, context
        self.log = settings.log
        self.lifecycle = TryLifecycle(context, store_for(context, self._history_cluster, settings.namespace))
        self.state: TryState | None = None
        self._connections: dict[str, ConnectionSettings] = {}

    def conn_id_of(self, plan: TryPlan | None) -> str:
        """The Airflow connection of the cluster ``plan``'s gang is on (the operator's without a plan,
        or for a plan stored before plans named their cluster)."""
        return (plan.kubernetes_conn_id if plan is not None else None) or self.settings.kubernetes_conn_id

    def connection(self, conn_id: str | None = None) -> ConnectionSettings:
        """The settings of ``conn_id`` (default: the cluster of this try's plan), resolved once."""
        conn_id = conn_id or self.conn_id_of(None if self.state is None else self.state.plan)
        if conn_id not in self._connections:
            self._connections[conn_id] = GangHook(conn_id=conn_id).connection_settings()
        return self._connections[conn_id]

    def cluster(self, work: Callable[[KubeClient], Awaitable[T]], *, conn_id: str | None = None) -> T:
        """Run ``work`` with a fresh client of ``conn_id`` (default: the cluster of this try's plan)
        on a private event loop (operators are synchronous)."""
        connection = self.connection(conn_id)

        async def main() -> T:
            async with await self.settings.client_options.connect(connection) as client:
                return await work(client)

        return asyncio.run(main())

    def _history_cluster(self, work: Callable[[KubeClient], Awaitable[T]]) -> T:
        """Where a cluster-kept try history is read and written (``operators.try_history``): always the
        operator's cluster, never the one a try's plan moved to (``OtherCluster``), so every try of
        the task instance - and the UI plugin (``plugin.try_history``) - finds one history."""
        return self.cluster(work, conn_id=self.settings.kubernetes_conn_id)

    def resume(self) -> TryState:
        """The state of this try, stored by the entry point that deferred; tracked for ``on_kill``."""
        state = self.lifecycle.in_progress()
        if state is None or state.plan.attempt != self.lifecycle.try_number:
            raise RuntimeError(f"try {self.lifecycle.try_number} resumed without its state in the task state store")
        self.state = state
        self.track(state)
        return state

    def track(self, state: TryState) -> None:
        """Hand ``state``'s gang to the waiter's kill switch: its cluster and, for a gang a MultiKueue
        manager dispatched to a worker with a mapped connection, that worker too (a connection that
        cannot be resolved now is logged and left out: MultiKueue removes the worker's copies)."""
        elsewhere: list[ConnectionSettings] = []
        worker_conn_id = None if state.multikueue is None else state.multikueue.worker_conn_id
        if worker_conn_id is not None:
            try:
                elsewhere.append(self.connection(worker_conn_id))
            except Exception as error:  # the manager's deletion still reaches the worker through Kueue
                self.log.warning("Gang %s: connection %r not usable (%s)", state.plan.gang, worker_conn_id, error)
        self.waiter.track(self.connection(self.conn_id_of(state.plan)), state.plan.spec, elsewhere=tuple(elsewhere))

    def trigger_arguments(
        self, plan: TryPlan, *, job_uid: str | None, size: int, started_at: float, deadline: float, **stage: Any
    ) -> TriggerArguments:
        """The arguments of a trigger waiting for ``plan``'s gang; ``stage``: the fields only one of the
        two waits sets (``pod_selector``, ``scheduling_gate``, ``deadline_reason``, ``startup_deadline``,
        ``read_checkpoints``)."""
        spec = plan.spec
        watch = inspection.watch_targets(spec, job_uid)
        common = TriggerArguments(
            kubernetes_conn_id=self.conn_id_of(plan),
            gang_name=spec.name,
            namespace=spec.namespace,
            deadline=deadline,
            mode=spec.mode,
            size=size,
            started_at=started_at,
            provisioning_request=watch.provisioning_request,
            workload_selector=watch.workload_selector,
            delete_on_kill=deletion.kill_targets(spec),
            preemption_taints=spec.cloud.preemption_taints,
            client_options=self.settings.client_options.to_dict(),
            try_number=plan.attempt,
            unreachable_seconds=self.settings.unreachable_timeout.total_seconds(),
            heartbeat_seconds=self.settings.heartbeat_seconds,
            watch_timeout_seconds=self.settings.watch_timeout_seconds,
            tries_allowed=tries_allowed(self.context["ti"]),
            step_description=plan.step,
        )
        return replace(common, **stage)

    def end_with(self, reason: Reason, message: str) -> BaseException:
        """End the try with ``reason`` after an exception; the exception to raise."""
        if self.state is None:
            records = self.lifecycle.end_without_gang(
                attempt=self.lifecycle.try_number,
                reason=reason,
                message=message,
                mode=self.settings.mode,
                size=self.settings.size,
            )
            return failure(reason, message, records)
        try:
            self.end(self.state.reservation_event, None, TryEnding.failed(reason, message))
        except BaseException as ended:  # end() always raises for a failed try
            return ended
        raise AssertionError("end() returned for a failed try")

    def end(
        self, reservation_event: GangEvent | None, run_event: GangEvent | None, ending: TryEnding | None = None
    ) -> Any:
        """Close the try: logs, teardown (always on failure; on success unless ``on_finish="keep"``),
        record; the task's return value on success - the summary, or rank 0's return value with the
        summary pushed as ``links.GANG_SUMMARY_XCOM_KEY`` (``settings.rank_zero_returns``) - else the
        typed exception is raised. ``ending`` defaults to what the last event says."""
        assert self.state is not None
        state, killed = self.state, self.waiter.killed
        ending = (
            KILLED if killed else self._ending(state, ending, run_event if run_event is not None else reservation_event)
        )
        succeeded = ending.succeeded and run_event is not None
        ranks = results.ranks_to_log(self.settings.log_ranks, state.size_run or state.plan.spec.size)
        returns = succeeded and self.settings.rank_zero_returns
        logs, notes = self._read_logs(state, sorted({*ranks, 0}) if returns else ranks, run_event)
        returned: ReturnValue | None = None
        if returns:
            returned, failure_of_rank_0 = self._rank_zero_return_value(state.plan.spec, logs)
            if failure_of_rank_0 is not None:
                succeeded, ending = False, failure_of_rank_0
        logs = {rank: function_call.without_return_value(text) for rank, text in logs.items() if rank in ranks}
        state = self._tearing_down(state)
        deleted = self._teardown(state, keep_members=succeeded and self.settings.on_finish == "keep")
        self._log_ended(state.plan.spec, logs, notes, deleted)
        record, records = self._record(state, reservation_event, run_event, ending)
        if not succeeded:
            return self._raise_ended(record, records, killed)
        summary = results.summary(state.plan, record, records, logs)
        if returned is None:
            return summary
        self.context["ti"].xcom_push(key=GANG_SUMMARY_XCOM_KEY, value=summary)
        return returned.value

    @staticmethod
    def _ending(state: TryState, ending: TryEnding | None, last: GangEvent | None) -> TryEnding:
        """``ending`` if given, else what the last event says."""
        if ending is not None:
            return ending
        if last is None:
            raise RuntimeError(f"try {state.plan.attempt} ended without an event or a reason")
        return TryEnding.of_event(last)

    def _log_ended(self, spec: GangSpec, logs: Mapping[int, str], notes: list[str], deleted: int) -> None:
        """The members' logs (a line per log line, by rank), the notes on those not read, the teardown."""
        for rank, text in sorted(logs.items()):
            for line in text.splitlines():
                self.log.info("[rank %d] %s", rank, line)
        for note in notes:
            self.log.info("%s", note)
        if deleted:
            self.log.info("Gang %s: deleted %d objects", spec.name, deleted)

    def _record(
        self, state: TryState, reservation_event: GangEvent | None, run_event: GangEvent | None, ending: TryEnding
    ) -> tuple[TryRecord, list[TryRecord]]:
        """Record the try (``results.try_record``, ended once: ``lifecycle.end``), log how it is recorded
        when that differs from what the trigger reported, and the story of every try; the record and
        every try's."""
        spec = state.plan.spec
        record = results.try_record(
            state,
            reservation_event,
            run_event,
            ending,
            gpus=cost.gpus_per_member(spec),
            now=clock.current().now(),
            rank_domains=self._rank_domains(spec, run_event),
        )
        records = self.lifecycle.end(record)
        if record.outcome != ending.reason.value:
            self.log.info(
                "Gang %s: the trigger reported %s; the try is recorded as %s (%s)",
                spec.name,
                ending.reason.value,
                record.outcome,
                record.message,
            )
        for line in results.story(records):
            self.log.info("%s", line)
        return record, records

    def _rank_zero_return_value(
        self, spec: GangSpec, logs: Mapping[int, str]
    ) -> tuple[ReturnValue | None, TryEnding | None]:
        """Rank 0's return value from its log, or the ending of a try whose rank 0 wrote none that can
        be read (``member.function_call.read_return_value``)."""
        try:
            return ReturnValue(function_call.read_return_value(logs.get(0, ""))), None
        except function_call.ReturnValueError as problem:
            self.log.error("Gang %s: %s", spec.name, problem)
            return None, TryEnding.failed(Reason.MEMBER_FAILED, f"@task.gang: {problem}")

    def _read_logs(
        self, state: TryState, ranks: list[int], run_event: GangEvent | None
    ) -> tuple[dict[int, str], list[str]]:
        """The wanted ranks' logs and notes on those without one, after a run, from the cluster the
        members ran on; best effort."""
        spec = state.plan.spec
        if run_event is None:
            return {}, []
        dispatch = state.multikueue
        if dispatch is not None and dispatch.worker is not None and dispatch.worker_conn_id is None:
            unseen = multikueue.not_seen_note(dispatch.worker)
            return {}, [f"(rank {rank}: log unavailable - {unseen})" for rank in ranks]
        nodes = {member.rank: member.node for member in run_event.members if member.node}
        saved = dict(run_event.logs)

        async def read(client: KubeClient) -> tuple[dict[int, str], list[str]]:
            return await member_logs.read_logs(client, spec, ranks, nodes=nodes, saved=saved)

        try:
            return self.cluster(read, conn_id=None if dispatch is None else dispatch.worker_conn_id)
        except Exception as error:  # the try ends all the same, without its members' logs
            self.log.warning("Gang %s: member logs not read (%s)", spec.name, error)
            return {}, []

    def _rank_domains(self, spec: GangSpec, run_event: GangEvent | None) -> dict[int, str]:
        """The domain of the topology label each member ran in, read from its node; ``{}`` without a
        topology or a run; best effort (the try is recorded all the same, without them)."""
        label = spec.topology_label
        placed = [(member.rank, member.node) for member in (run_event.members if run_event else ()) if member.node]
        if label is None or not placed:
            return {}
        try:
            return self.cluster(lambda client: topology_reads.rank_domains(client, label, placed))
        except Exception as error:  # the record is written all the same, without the domains
            self.log.warning("Gang %s: where the ranks ran not read (%s)", spec.name, error)
            return {}

    def _tearing_down(self, state: TryState) -> TryState:
        """``state`` with ``teardown_started_at`` now, stored so that the Gang view shows the try
        tearing down (and the next try, that its worker stopped in the teardown); best effort, as a
        store on an unreachable cluster cannot take it: the record still has the time."""
        started = state.with_changes(teardown_started_at=clock.current().now())
        try:
            self.state = self.lifecycle.update(state, teardown_started_at=started.teardown_started_at)
        except Exception as error:  # the teardown runs all the same
            self.log.warning("Gang %s: the teardown's start not stored (%s)", state.plan.gang, error)
            self.state = started
        return self.state

    def _teardown(self, state: TryState, *, keep_members: bool) -> int:
        """Delete the gang (``hooks.deletion.teardown``) on its cluster, then on the MultiKueue worker
        it ran on when a connection is mapped to it (Kueue removes its copies there once the manager's
        Workload is gone; this deletes them at once); how many objects were deleted; best effort."""
        spec = state.plan.spec

        async def delete(client: KubeClient) -> int:
            return await deletion.teardown(client, spec, keep_members=keep_members)

        worker_conn_id = None if state.multikueue is None else state.multikueue.worker_conn_id
        deleted = 0
        for conn_id in (self.conn_id_of(state.plan), worker_conn_id):
            if conn_id is None:
                continue
            try:
                deleted += self.cluster(delete, conn_id=conn_id)
            except Exception as error:  # the try ends all the same; what is left is withdrawn by the next try
                self.log.warning(
                    "Gang %s: clean-up on %s incomplete (%s); the next try withdraws what is left",
                    spec.name,
                    conn_id,
                    error,
                )
        return deleted

    def _raise_ended(self, record: TryRecord, records: list[TryRecord], killed: bool) -> Any:
        message = f"gang {record.gang}: {record.message}"
        if killed:
            raise AirflowTaskTerminated(f"{Reason.KILLED.value}: {message}")
        raise failure(Reason(record.outcome), message, records)


def tries_allowed(ti: Any) -> int | None:
    """``M`` of "try N of M": ``max_tries + 1``, as Airflow's own failure e-mail counts (``"Try
    {{try_number}} out of {{max_tries + 1}}"``, ``airflow/sdk/execution_time/task_runner.py``, 3.3);
    ``None`` when the task instance does not say."""
    max_tries = getattr(ti, "max_tries", None)
    return int(max_tries) + 1 if isinstance(max_tries, int) and max_tries >= 0 else None

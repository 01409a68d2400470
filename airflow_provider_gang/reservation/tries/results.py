"""The record of a finished try and the XCom summary of a successful task.

Timings (seconds, ``None`` when the try never got there), from the trigger events' ``timings``:

- ``queue_seconds``: reservation requested -> granted (queueing and node provisioning of the
  ProvisioningRequest or the Kueue admission; the cluster does not tell them apart reliably);
- ``provisioning_seconds``: members launched -> every member running (binding, image pull, start);
- ``run_seconds``: every member running -> the run's end;
- tearing down: ``TryState.teardown_started_at`` -> ``now``, the record being made as the
  teardown returned (``operators.try_run``); both kept as UNIX times beside ``requested_at``.

When the run ended with ``member_failed``, the exit-code policy of the try's spec
(``reservation.exit_codes``) may turn it into ``member_exit_fails_for_good`` (no retry) or
``member_exit_retryable``; the record keeps which rank, code and rule decided
(``exit_code_decision``), and so does the summary's ``tries``.

GPU time comes from ``reservation.cost``: reserved from the grant until the gang was released, used
by each member while it ran, idle the difference - for this try and summed over every try of the
task instance, failed ones included. With a ``checkpoint``, the GPU time a failed try used is split
at the checkpoint its members reported (``reservation.checkpoint.split_work``): *lost* is what a later
try redoes, *saved* the checkpointed steps a resuming try does not redo.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.reservation import checkpoint, cost, exit_codes, unread_reports
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.phases import Phase, Reason, is_retryable
from airflow_provider_gang.reservation.records.events import GangEvent
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from airflow_provider_gang.reservation.spec import GangSpec


@dataclass(frozen=True)
class TryEnding:
    """How a try ended: the event that ended it, or a reason of the operator's own (killed, an
    exception, the reservation lost before launch)."""

    succeeded: bool
    reason: Reason
    message: str

    @classmethod
    def of_event(cls, event: GangEvent) -> TryEnding:
        return cls(succeeded=event.succeeded, reason=event.reason, message=event.message)

    @classmethod
    def failed(cls, reason: Reason, message: str) -> TryEnding:
        return cls(succeeded=False, reason=reason, message=message)


NODE_LOSS_REASONS = frozenset(
    {
        "NodeLost",
        "Shutdown",
        "Terminated",
        "TerminationByKubelet",
        "NodeAffinity",
        "DeletionByPodGC",
        "DeletionByTaintManager",
    }
)
"""Reasons of a lost member that say its node went away or is shutting down: the pod's phase
``Unknown`` (``NodeLost``), the kubelet's node shutdown (``Shutdown``, ``Terminated``,
``TerminationByKubelet``), a node no longer matching (``NodeAffinity``), and the ``DisruptionTarget``
reasons of the pod garbage collector and the taint manager for pods of removed or tainted nodes
(``DeletionByPodGC``, ``DeletionByTaintManager``: https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions).
A pod deleted or evicted while its node stays is a transient loss (``reservation.ladder_choice``)."""


def any_node_reclaimed(statuses: Sequence[MemberStatus]) -> bool:
    """Whether a lost member of ``statuses`` lost its node (:data:`NODE_LOSS_REASONS`)."""
    return any(member.state is MemberState.LOST and member.reason in NODE_LOSS_REASONS for member in statuses)


def ranks_to_log(log_ranks: Sequence[int] | str, size: int) -> list[int]:
    """The ranks whose logs are streamed: ``"all"`` or the listed ones that exist after a shrink."""
    if log_ranks == "all":
        return list(range(size))
    return sorted({int(rank) for rank in log_ranks if 0 <= int(rank) < size})


def _event_time(event: GangEvent | None) -> float | None:
    return None if event is None or event.timings is None else event.timings.event_at


@dataclass(frozen=True)
class _StageTimes:
    """When the try's reservation was granted (``None``: never) and how long each stage lasted
    (``None``: not reached), on the provider's clock."""

    reserved_at: float | None
    queue_seconds: float | None
    provisioning_seconds: float | None
    run_seconds: float | None


def _stage_times(
    state: TryState, reservation_event: GangEvent | None, run_event: GangEvent | None, *, now: float
) -> _StageTimes:
    """The stages of the try from its state and its two events (the run's end: its event, else ``now``)."""
    granted = reservation_event is not None and reservation_event.succeeded
    reserved_at = _event_time(reservation_event) if granted else None
    launched_at = state.launched_at
    running_at = None if run_event is None or run_event.timings is None else run_event.timings.first_seen(Phase.RUNNING)
    ended_at = _event_time(run_event) or now
    return _StageTimes(
        reserved_at=reserved_at,
        queue_seconds=None if reserved_at is None else max(0.0, reserved_at - state.plan.requested_at),
        provisioning_seconds=None if running_at is None or launched_at is None else max(0.0, running_at - launched_at),
        run_seconds=None if running_at is None else max(0.0, ended_at - running_at),
    )


def _outcome(
    ending: TryEnding, statuses: Sequence[MemberStatus], spec: GangSpec
) -> tuple[Reason, str, exit_codes.ExitCodeVerdict | None]:
    """The reason and message the try is recorded with: the ending's, unless the exit-code policy
    decides a failed member's try (``reservation.exit_codes.judge``), whose verdict comes with them."""
    verdict = None
    if ending.reason is Reason.MEMBER_FAILED and not ending.succeeded:
        verdict = exit_codes.judge(statuses, retry_on=spec.retry_on_exit_codes, fail_on=spec.fail_on_exit_codes)
    if verdict is None:
        return ending.reason, ending.message, None
    return verdict.reason, f"{verdict.describe()}; {ending.message}", verdict


def try_record(
    state: TryState,
    reservation_event: GangEvent | None,
    run_event: GangEvent | None,
    ending: TryEnding,
    *,
    gpus: int,
    now: float,
    rank_domains: Mapping[int, str] | None = None,
) -> TryRecord:
    """What this try did, for the history and the summary (see the module docstring); ``rank_domains``:
    the domain of the topology label each rank ran in (read from its node by the caller). Long for
    one reason: one line per field of the record, from the steps above it."""
    plan, spec = state.plan, state.plan.spec
    statuses = [] if run_event is None else list(run_event.members)
    size_run = state.size_run or spec.size
    report = None if run_event is None else run_event.checkpoint
    resumed_from = spec.checkpoint.resume_step if spec.checkpoint is not None else None
    times = _stage_times(state, reservation_event, run_event, now=now)
    usage = cost.try_cost(
        gpus=gpus, members_reserved=size_run, reserved_at=times.reserved_at, released_at=now, members=statuses
    )
    reason, message, verdict = _outcome(ending, statuses, spec)
    split = checkpoint.WorkSplit()
    if spec.checkpoint is not None and not ending.succeeded:
        split = checkpoint.split_work(usage.used, start_step=resumed_from or 0, report=report)
    return TryRecord(
        attempt=plan.attempt,
        gang=plan.gang,
        step=plan.step,
        step_index=plan.step_index,
        mode=spec.mode.value,
        size=size_run,
        outcome=reason.value,
        message=message,
        retryable=not ending.succeeded and is_retryable(reason),
        queue_seconds=times.queue_seconds,
        provisioning_seconds=times.provisioning_seconds,
        run_seconds=times.run_seconds,
        gpu_seconds_reserved=usage.reserved,
        gpu_seconds_used=usage.used,
        gpu_seconds_idle=usage.idle,
        exit_codes={str(member.rank): member.exit_code for member in statuses if member.exit_code is not None},
        ladder=plan.ladder,
        adopted_from=plan.adopted_from,
        checkpoint_step=None if report is None else report.step,
        checkpoint_progress=None if report is None else report.progress,
        resumed_from_step=resumed_from,
        gpu_seconds_lost=split.lost,
        gpu_seconds_saved=split.saved,
        exit_code_decision=None if verdict is None else verdict.to_dict(),
        kubernetes_conn_id=plan.kubernetes_conn_id,
        namespace=spec.namespace,
        repeated=plan.repeats,
        node_reclaimed=reason is Reason.MEMBER_LOST and any_node_reclaimed(statuses),
        requested_at=plan.requested_at,
        start_deadline=plan.start_deadline,
        zone=spec.zone,
        queue=spec.queue,
        provisioning_class=spec.provisioning_class,
        teardown_started_at=state.teardown_started_at,
        teardown_ended_at=None if state.teardown_started_at is None else max(now, state.teardown_started_at),
        unread_reports=() if run_event is None else run_event.unread_reports,
        worker_cluster=None if state.multikueue is None else state.multikueue.worker,
        worker_kubernetes_conn_id=None if state.multikueue is None else state.multikueue.worker_conn_id,
        required_topology=spec.required_topology,
        preferred_topology=spec.preferred_topology,
        topology_note=state.topology_note,
        rank_nodes={str(member.rank): member.node for member in statuses if member.node},
        rank_domains={str(rank): domain for rank, domain in sorted((rank_domains or {}).items())},
    )


def describe_rank_domains(rank_domains: Mapping[str, str]) -> str:
    """``"rack-b1: ranks 0-3; rack-b2: ranks 4-5, 7"``: which ranks ran in which domain, domains in
    the order of their lowest rank, ranks as runs of consecutive numbers."""
    by_domain: dict[str, list[int]] = {}
    for rank, domain in sorted(((int(rank), domain) for rank, domain in rank_domains.items())):
        by_domain.setdefault(domain, []).append(rank)
    return "; ".join(f"{domain}: {describe_ranks(ranks)}" for domain, ranks in by_domain.items())


def describe_ranks(ranks: Iterable[int]) -> str:
    """``"rank 3"``, ``"ranks 0-3, 5, 7"``: ``ranks`` sorted, as runs of consecutive numbers."""
    runs: list[list[int]] = []
    for rank in sorted(ranks):
        if runs and rank == runs[-1][-1] + 1:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    listed = ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}" for run in runs)
    return f"rank{'s' if sum(map(len, runs)) > 1 else ''} {listed}"


def summary(
    plan: TryPlan, record: TryRecord, records: list[TryRecord], logs: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """The XCom ``return_value`` of a successful task (plain JSON values); ``rank_logs`` maps each
    logged rank (``log_ranks``, as a string key) to the tail of its log - a trainer's final metrics."""
    spec = plan.spec
    this_try = totals([record])
    return {
        "gang": plan.gang,
        "namespace": spec.namespace,
        "reservation_mode": spec.mode.value,
        "fallback_step": plan.step,
        "size_requested": spec.size_before_shrink,
        "size_run": record.size,
        "zone": spec.zone,
        "queue": spec.queue,
        "provisioning_class": spec.provisioning_class,
        "worker_cluster": record.worker_cluster,
        "worker_kubernetes_conn_id": record.worker_kubernetes_conn_id,
        "reservation_name": spec.reservation_name,
        "queue_seconds": record.queue_seconds,
        "provisioning_seconds": record.provisioning_seconds,
        "run_seconds": record.run_seconds,
        "exit_codes": record.exit_codes,
        "required_topology": spec.required_topology,
        "preferred_topology": spec.preferred_topology,
        "rank_domains": dict(record.rank_domains),
        **this_try,
        "all_tries": totals(records),
        "tries": [try_summary(item) for item in records],
        "rank_logs": {str(rank): text for rank, text in sorted((logs or {}).items())},
        "checkpoint": None
        if spec.checkpoint is None
        else {
            "location": spec.checkpoint.location,
            "resumed_from_step": spec.checkpoint.resume_step,
            **checkpoint_totals(records),
        },
    }


def try_summary(record: TryRecord) -> dict[str, Any]:
    """One try for the summary: its record with GPU time in the units and names of the summary's
    own figures (``gpu_hours_reserved/used/idle``), without the stored ladder."""
    values = {
        key: value
        for key, value in record.to_dict().items()
        if not key.startswith("gpu_seconds_") and key not in ("ladder", "version")
    }
    return {**values, **totals([record]), **checkpoint_totals([record])}


def story(records: Sequence[TryRecord]) -> list[str]:
    """The lines printed at the end of the task log, success or failure: one per try (step - and the
    cluster's connection when the tries ran on several -, size, outcome, GPU-hours), then the totals -
    so a user without database access can read the run."""
    lines = ["Gang summary: try | step | mode | size | outcome | GPU-h reserved / used / idle"]
    several_clusters = len({record.kubernetes_conn_id for record in records if record.kubernetes_conn_id}) > 1
    for record in records:
        hours = totals([record])
        step = f"{record.step} on {record.kubernetes_conn_id}" if several_clusters else record.step
        lines.append(
            f"  try {record.attempt} | {step} | {record.mode} | {record.size} | {record.outcome}"
            f" | {hours['gpu_hours_reserved']:.3f} / {hours['gpu_hours_used']:.3f} / "
            f"{hours['gpu_hours_idle']:.3f}" + (f" | {record.message}" if record.message else "")
        )
        label = record.required_topology or record.preferred_topology
        if label and record.rank_domains:
            lines.append(f"    where the ranks ran ({label}): {describe_rank_domains(record.rank_domains)}")
    overall = totals(records)
    lines.append(
        f"  all tries: {overall['gpu_hours_reserved']:.3f} GPU-h reserved, {overall['gpu_hours_used']:.3f} "
        f"used, {overall['gpu_hours_idle']:.3f} idle"
    )
    resumed = [record for record in records if record.resumed_from_step is not None]
    if resumed or any(record.checkpoint_step is not None for record in records):
        hours = checkpoint_totals(records)
        steps = ", ".join(f"try {record.attempt} from step {record.resumed_from_step}" for record in resumed)
        saved = (
            f"{hours['gpu_hours_saved']:.4f} GPU-h saved by resuming ({steps})"
            if resumed
            else f"{hours['gpu_hours_saved']:.4f} GPU-h checkpointed that a resuming try would not redo "
            "(no try has resumed yet)"
        )
        lines.append(
            f"  checkpoints: {hours['gpu_hours_lost']:.4f} GPU-h lost (work since the last checkpoint, redone), {saved}"
        )
    for record in records:
        if record.unread_reports:
            unread = unread_reports.summarize(record.unread_reports)
            lines.append(f"  try {record.attempt} could not read the checkpoint reports of {unread}")
    return lines


def totals(records: Sequence[TryRecord]) -> dict[str, float]:
    """GPU-hours reserved, used and idle, summed over ``records`` (failed tries included)."""
    return {
        "gpu_hours_reserved": round(sum(item.gpu_seconds_reserved for item in records) / 3600, 6),
        "gpu_hours_used": round(sum(item.gpu_seconds_used for item in records) / 3600, 6),
        "gpu_hours_idle": round(sum(item.gpu_seconds_idle for item in records) / 3600, 6),
    }


def checkpoint_totals(records: Sequence[TryRecord]) -> dict[str, float]:
    """GPU-hours lost to failed tries (work since their last checkpoint, redone) and saved by resuming
    (their checkpointed work, not redone), summed over ``records``."""
    return {
        "gpu_hours_lost": round(sum(item.gpu_seconds_lost for item in records) / 3600, 6),
        "gpu_hours_saved": round(sum(item.gpu_seconds_saved for item in records) / 3600, 6),
    }


def describe_tries(records: Sequence[TryRecord]) -> str:
    """One line per try for the final failure message: its step and outcome."""
    return "; ".join(
        f"try {item.attempt} [{item.step}, {item.mode}, size {item.size}]: {item.outcome} ({item.message})"
        for item in records
    )

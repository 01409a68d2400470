"""A finished try's record, the task's summary and the story in the log: timings, exit-code policy,
GPU time, from typed events."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_gang.reservation.checkpoint import Checkpoint, CheckpointReport
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from airflow_provider_gang.reservation.tries.results import (
    TryEnding,
    checkpoint_totals,
    describe_rank_domains,
    describe_tries,
    ranks_to_log,
    story,
    summary,
    totals,
    try_record,
    try_summary,
)
from airflow_provider_gang.reservation.unread_reports import ReportGap, UnreadReport
from tests.builders import gang_event, gang_spec

REQUESTED = 1_000.0


def plan(**spec: object) -> TryPlan:
    return TryPlan(
        attempt=1,
        gang="gang-t1-abc",
        step="as configured",
        step_index=None,
        spec=gang_spec(size=2, **spec),
        requested_at=REQUESTED,
        reservation_deadline=REQUESTED + 600,
        deadline_reason=Reason.DEADLINE,
        start_deadline=None,
    )


def record(attempt: int, outcome: str, reserved: float = 0.0, used: float = 0.0, message: str = "why") -> TryRecord:
    return TryRecord(
        attempt=attempt,
        gang=f"g-t{attempt}",
        step="as configured" if attempt == 1 else "other zone b",
        step_index=None if attempt == 1 else 0,
        mode="provisioning_request",
        size=8,
        outcome=outcome,
        message=message,
        retryable=True,
        gpu_seconds_reserved=reserved,
        gpu_seconds_used=used,
        gpu_seconds_idle=reserved - used,
    )


def members(exit_code: int | None = None) -> tuple[MemberStatus, ...]:
    return (
        MemberStatus(0, MemberState.SUCCEEDED, "p-0", "n", exit_code=0, started_at=1_100.0, finished_at=1_400.0),
        MemberStatus(1, MemberState.FAILED, "p-1", "n", exit_code=exit_code, started_at=1_100.0, finished_at=1_400.0),
    )


RESERVED = gang_event(Reason.RESERVED, started_at=REQUESTED, event_at=REQUESTED + 60)


@pytest.mark.parametrize(
    ("log_ranks", "size", "expected"),
    [([0], 8, [0]), ("all", 3, [0, 1, 2]), ([0, 6], 4, [0]), ((3, 1, 1), 4, [1, 3])],
    ids=["rank-0", "all", "rank-gone-after-shrink", "sorted-unique"],
)
def test_ranks_to_log(log_ranks: list[int] | str, size: int, expected: list[int]) -> None:
    assert ranks_to_log(log_ranks, size) == expected


def test_a_successful_run_records_its_timings_and_gpu_time() -> None:
    state = TryState(plan=plan(), launched_at=REQUESTED + 70, size_run=2)
    run = gang_event(
        Reason.ALL_SUCCEEDED,
        started_at=REQUESTED + 70,
        event_at=1_400.0,
        phases={"running": 1_100.0},
        members=members(0),
    )
    made = try_record(state, RESERVED, run, TryEnding.of_event(run), gpus=1, now=1_410.0)
    assert (made.outcome, made.retryable, made.message) == ("all_succeeded", False, "ended: all_succeeded")
    assert (made.queue_seconds, made.provisioning_seconds, made.run_seconds) == (60.0, 30.0, 300.0)
    assert made.exit_codes == {"0": 0, "1": 0}
    assert (made.gpu_seconds_reserved, made.gpu_seconds_used) == (700.0, 600.0)


def test_a_try_that_never_got_its_reservation_records_no_timings() -> None:
    refused = gang_event(Reason.CAPACITY_NOT_FOUND, started_at=REQUESTED, event_at=REQUESTED + 30, stage="x")
    state = TryState(plan=plan())
    made = try_record(state, refused, None, TryEnding.of_event(refused), gpus=1, now=REQUESTED + 31)
    assert (made.queue_seconds, made.provisioning_seconds, made.run_seconds) == (None, None, None)
    assert (made.outcome, made.retryable, made.size, made.gpu_seconds_reserved) == ("capacity_not_found", True, 2, 0.0)


def test_a_record_keeps_where_the_try_ran_its_start_by_and_its_teardown() -> None:
    """What the timeline lane of a finished try draws: place, ``start_by`` limit and teardown."""
    try_plan = dataclasses.replace(
        plan(zone="us-central1-b", provisioning_class="queued-provisioning.gke.io"), start_deadline=REQUESTED + 900
    )
    refused = gang_event(Reason.CAPACITY_NOT_FOUND, started_at=REQUESTED, event_at=REQUESTED + 30, stage="x")
    state = TryState(plan=try_plan, teardown_started_at=REQUESTED + 31)
    made = try_record(state, refused, None, TryEnding.of_event(refused), gpus=1, now=REQUESTED + 33.5)
    assert (made.requested_at, made.start_deadline) == (REQUESTED, REQUESTED + 900)
    assert (made.zone, made.queue, made.provisioning_class) == ("us-central1-b", None, "queued-provisioning.gke.io")
    assert (made.teardown_started_at, made.teardown_ended_at) == (REQUESTED + 31, REQUESTED + 33.5)
    untorn = try_record(TryState(plan=try_plan), refused, None, TryEnding.of_event(refused), gpus=1, now=REQUESTED)
    assert (untorn.teardown_started_at, untorn.teardown_ended_at) == (None, None)  # no teardown ran in the try


def test_an_ending_of_the_operator_s_own_and_an_event_without_timings() -> None:
    state = TryState(plan=plan(), launched_at=REQUESTED + 70, size_run=2)
    run = dataclasses.replace(gang_event(Reason.ALL_SUCCEEDED, started_at=0, event_at=0), timings=None)
    made = try_record(state, None, run, TryEnding.failed(Reason.KILLED, "on_kill"), gpus=1, now=2_000.0)
    assert (made.outcome, made.message, made.run_seconds, made.queue_seconds) == ("killed", "on_kill", None, None)


@pytest.mark.parametrize(
    ("exit_code", "outcome", "retryable", "decision"),
    [
        pytest.param(
            2,
            "member_exit_fails_for_good",
            False,
            {"rank": 1, "exit_code": 2, "rule": "fail_on_exit_codes", "reason": "member_exit_fails_for_good"},
            id="fail-on",
        ),
        pytest.param(
            137,
            "member_exit_retryable",
            True,
            {"rank": 1, "exit_code": 137, "rule": "retry_on_exit_codes", "reason": "member_exit_retryable"},
            id="retry-on",
        ),
        pytest.param(1, "member_failed", True, None, id="unlisted"),
    ],
)
def test_the_try_record_applies_the_exit_code_policy(
    exit_code: int, outcome: str, retryable: bool, decision: dict[str, object] | None
) -> None:
    state = TryState(plan=plan(retry_on_exit_codes=[137], fail_on_exit_codes=[2]), launched_at=1_050.0, size_run=2)
    run = gang_event(Reason.MEMBER_FAILED, started_at=1_050.0, event_at=1_400.0, members=members(exit_code))
    made = try_record(state, RESERVED, run, TryEnding.of_event(run), gpus=0, now=1_410.0)
    assert (made.outcome, made.retryable, made.exit_code_decision) == (outcome, retryable, decision)
    assert made.exit_codes == {"0": 0, "1": exit_code}
    assert try_summary(made)["exit_code_decision"] == decision


def test_the_summary_names_the_gang_its_logs_and_every_try() -> None:
    try_plan = plan(zone="zone-a")
    tries = [record(1, "deadline", 3600, 0), record(2, "all_succeeded", 7200, 5400)]
    made = summary(try_plan, tries[1], tries, {1: "loss 0.1", 0: "loss 0.2"})
    assert (made["gang"], made["zone"], made["size_requested"], made["checkpoint"]) == (
        "gang-t1-abc",
        "zone-a",
        2,
        None,
    )
    assert made["rank_logs"] == {"0": "loss 0.2", "1": "loss 0.1"}
    assert made["all_tries"] == {"gpu_hours_reserved": 3.0, "gpu_hours_used": 1.5, "gpu_hours_idle": 1.5}
    assert [item["attempt"] for item in made["tries"]] == [1, 2]
    assert "ladder" not in made["tries"][0] and "version" not in made["tries"][0]
    assert summary(try_plan, tries[1], tries)["rank_logs"] == {}


def test_a_failed_checkpointed_try_splits_its_gpu_time_at_the_reported_step() -> None:
    state = TryState(plan=plan(checkpoint=Checkpoint("/ckpt", try_number=1)), launched_at=1_050.0, size_run=2)
    run = gang_event(
        Reason.SPOT_PREEMPTED,
        started_at=1_050.0,
        event_at=1_400.0,
        members=members(),
        checkpoint=CheckpointReport(3, 4),
    )
    made = try_record(state, RESERVED, run, TryEnding.of_event(run), gpus=1, now=1_410.0)
    assert made.gpu_seconds_used == 600.0 and made.gpu_seconds_saved + made.gpu_seconds_lost == 600.0
    assert (made.checkpoint_step, made.checkpoint_progress) == (3, 4)


def test_the_reports_a_try_could_not_read_are_kept_in_its_record_and_told_in_the_story() -> None:
    state = TryState(plan=plan(checkpoint=Checkpoint("/ckpt", try_number=1)), launched_at=1_050.0, size_run=2)
    unread = (UnreadReport(0, ReportGap.DELETE_FAILED, "503 ServiceUnavailable"),)
    run = gang_event(
        Reason.SPOT_PREEMPTED, started_at=1_050.0, event_at=1_400.0, members=members(), unread_reports=unread
    )
    made = try_record(state, RESERVED, run, TryEnding.of_event(run), gpus=1, now=1_410.0)
    assert made.unread_reports == unread and made.checkpoint_step is None
    assert story([made])[-1] == (
        "  try 1 could not read the checkpoint reports of ranks [0] (not stopped: the delete failed past the "
        "client's retries)"
    )
    assert unread[0].describe() == (
        "the checkpoint report of rank 0 was not read: not stopped: the delete failed past the client's retries "
        "(503 ServiceUnavailable)"
    )
    assert UnreadReport(None, ReportGap.GONE_UNSEEN).describe() == (
        "the checkpoint report of a member without a rank was not read: the pod was removed before its "
        "terminated state was seen"
    )


def test_a_checkpointed_summary_says_where_and_what_resuming_saved() -> None:
    checkpointed = plan(checkpoint=Checkpoint("/ckpt", try_number=2, resume_step=15))
    saved = dataclasses.replace(record(1, "spot_preempted"), gpu_seconds_lost=900, gpu_seconds_saved=2700)
    made = summary(checkpointed, record(2, "all_succeeded"), [saved, record(2, "all_succeeded")])
    assert made["checkpoint"] == {
        "location": "/ckpt",
        "resumed_from_step": 15,
        "gpu_hours_lost": 0.25,
        "gpu_hours_saved": 0.75,
    }
    assert checkpoint_totals([saved]) == {"gpu_hours_lost": 0.25, "gpu_hours_saved": 0.75}


def test_the_story_has_a_line_per_try_and_the_totals() -> None:
    lines = story([record(1, "deadline", 3600, 0), record(2, "all_succeeded", 3600, 3600, message="")])
    assert lines[1].endswith("| 1.000 / 0.000 / 1.000 | why")
    assert lines[2].endswith("| 1.000 / 1.000 / 0.000")
    assert lines[-1] == "  all tries: 2.000 GPU-h reserved, 1.000 used, 1.000 idle"
    assert not any("checkpoints:" in line for line in lines)


@pytest.mark.parametrize(
    ("rank_domains", "said"),
    [
        ({"0": "rack-b1"}, "rack-b1: rank 0"),
        ({"1": "rack-b1", "0": "rack-b1", "2": "rack-b1"}, "rack-b1: ranks 0-2"),
        (
            {"0": "rack-b1", "1": "rack-b1", "2": "rack-b2", "3": "rack-b1", "10": "rack-b2"},
            "rack-b1: ranks 0-1, 3; rack-b2: ranks 2, 10",
        ),
    ],
    ids=["one-rank", "a-run-of-ranks", "runs-and-single-ranks-by-lowest-rank"],
)
def test_where_the_ranks_ran_is_told_by_domain_as_runs_of_ranks(rank_domains: dict[str, str], said: str) -> None:
    assert describe_rank_domains(rank_domains) == said


def test_the_story_says_where_the_ranks_of_a_topology_gang_ran() -> None:
    placed = dataclasses.replace(
        record(1, "all_succeeded"), required_topology="rack", rank_domains={"0": "rack-b1", "1": "rack-b1"}
    )
    unread = dataclasses.replace(record(2, "all_succeeded"), preferred_topology="rack")
    lines = story([placed, unread])
    assert lines[2] == "    where the ranks ran (rack): rack-b1: ranks 0-1"
    assert not any("where the ranks ran" in line for line in lines[3:])


def test_the_story_of_checkpointed_tries_says_what_was_lost_and_saved() -> None:
    reported = dataclasses.replace(record(1, "spot_preempted"), checkpoint_step=15)
    assert story([reported])[-1].endswith(
        " GPU-h checkpointed that a resuming try would not redo (no try has resumed yet)"
    )
    assert "saved by resuming" not in story([reported])[-1]
    resumed = dataclasses.replace(record(2, "all_succeeded"), resumed_from_step=15)
    assert story([resumed])[-1].endswith(" GPU-h saved by resuming (try 2 from step 15)")


def test_totals_and_the_failure_story_of_the_tries() -> None:
    assert totals([record(1, "deadline", 3600, 0), record(2, "all_succeeded", 7200, 5400)]) == {
        "gpu_hours_reserved": 3.0,
        "gpu_hours_used": 1.5,
        "gpu_hours_idle": 1.5,
    }
    assert (
        describe_tries([record(1, "deadline")]) == "try 1 [as configured, provisioning_request, size 8]: deadline (why)"
    )

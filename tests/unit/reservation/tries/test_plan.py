"""Try planning, table-driven: which step a try takes, when it adopts, when it must not start."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_gang.reservation.checkpoint import Checkpoint
from airflow_provider_gang.reservation.fallback import OtherZone, RetryAsIs, ShrinkTo
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import TryRecord
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources
from airflow_provider_gang.reservation.tries.plan import (
    NoTry,
    adopt,
    current_sequence,
    describe_step,
    effective_ladder,
    plan_try,
    start_window_end,
)
from airflow_provider_gang.reservation.unread_reports import ReportGap, UnreadReport

NOW = 1_800_000_000.0
LADDER = (OtherZone("zone-b"), ShrinkTo(4))


def build_spec(name: str = "configured") -> GangSpec:
    template = {"spec": {"containers": [{"name": "trainer", "image": "trainer:1"}]}}
    return GangSpec(
        name=name,
        namespace="default",
        size=8,
        min_size=4,
        pod_template=template,
        resources=MemberResources(gpus=1),
        provisioning_class="check-capacity.autoscaling.x-k8s.io",
        zone="zone-a",
    )


def record(attempt: int, outcome: Reason, step_index: int | None = None, ladder: Any = None) -> TryRecord:
    return TryRecord(
        attempt=attempt,
        gang=f"g-t{attempt}",
        step="",
        step_index=step_index,
        mode="provisioning_request",
        size=8,
        outcome=outcome.value,
        message="",
        retryable=outcome is not Reason.ALL_SUCCEEDED,
        ladder=ladder,
    )


def window(start_by: timedelta | None, interval_end: datetime | None = None) -> float | None:
    context = {"data_interval_end": interval_end or datetime.fromtimestamp(NOW, timezone.utc)}
    return start_window_end(context, start_by)


def plan(
    try_number: int,
    records: list[TryRecord],
    *,
    start_by: timedelta | None = None,
    interval_end: datetime | None = None,
    ladder: Any = LADDER,
    now: float = NOW,
    checkpoint: Checkpoint | None = None,
) -> Any:
    ti = SimpleNamespace(dag_id="nightly", task_id="train", run_id="scheduled__1", map_index=-1, try_number=try_number)
    return plan_try(
        ti=ti,
        records=records,
        ladder=ladder,
        configured=dataclasses.replace(build_spec(), checkpoint=checkpoint),
        reservation_timeout_seconds=600,
        start_deadline=window(start_by, interval_end),
        now=now,
    )


@pytest.mark.parametrize(
    ("try_number", "records", "step", "zone", "size"),
    [
        pytest.param(1, [], "as configured", "zone-a", 8, id="first-try-as-configured"),
        pytest.param(
            2, [record(1, Reason.CAPACITY_NOT_FOUND)], "other zone zone-b", "zone-b", 8, id="refused-moves-zone"
        ),
        pytest.param(
            3,
            [record(1, Reason.CAPACITY_NOT_FOUND), record(2, Reason.DEADLINE, 0)],
            "shrink to 4 members",
            "zone-b",
            4,
            id="steps-accumulate",
        ),
        pytest.param(
            2, [record(1, Reason.BOOKING_EXPIRED)], "other zone zone-b", "zone-b", 8, id="booking-expired-moves-zone"
        ),
        pytest.param(
            3,
            [record(1, Reason.ALL_SUCCEEDED), record(2, Reason.CAPACITY_NOT_FOUND)],
            "other zone zone-b",
            "zone-b",
            8,
            id="cleared-after-success-starts-a-new-sequence",
        ),
    ],
)
def test_step_follows_try_number_and_recorded_reason(
    try_number: int, records: list[TryRecord], step: str, zone: str, size: int
) -> None:
    chosen, _ = plan(try_number, records)
    spec = chosen.spec
    assert (chosen.step, spec.zone, spec.size) == (step, zone, size)
    assert f"-t{try_number}-" in chosen.gang  # a new name (so new objects) per try


def test_exhausted_ladder_is_not_tried() -> None:
    records = [record(1, Reason.DEADLINE), record(2, Reason.DEADLINE, 0), record(3, Reason.DEADLINE, 1)]
    with pytest.raises(NoTry) as caught:
        plan(4, records)
    assert caught.value.reason is Reason.LADDER_EXHAUSTED


def test_no_step_for_the_reason_exhausts_the_ladder() -> None:
    with pytest.raises(NoTry) as caught:
        plan(2, [record(1, Reason.MEMBER_FAILED)])  # neither other-zone nor shrink answers a crashed member
    assert caught.value.reason is Reason.LADDER_EXHAUSTED


def test_start_window_passed_is_not_tried() -> None:
    with pytest.raises(NoTry) as caught:
        plan(
            2,
            [record(1, Reason.DEADLINE)],
            start_by=timedelta(hours=4),
            interval_end=datetime.fromtimestamp(NOW, timezone.utc) - timedelta(hours=5),
        )
    assert caught.value.reason is Reason.START_WINDOW_MISSED


def test_start_window_caps_the_reservation_wait() -> None:
    chosen, _ = plan(1, [], start_by=timedelta(minutes=3))
    assert chosen.reservation_deadline == NOW + 180
    assert chosen.deadline_reason is Reason.START_WINDOW_MISSED


def test_unfinished_try_is_adopted_by_the_next_with_a_deadline_of_its_own() -> None:
    crashed, _ = plan(1, [])
    later = NOW + 3600  # try 1's deadline (NOW + 600) has long passed
    adopted, explanation = adopt(crashed, try_number=2, start_deadline=None, reservation_timeout_seconds=600, now=later)
    assert (adopted.gang, adopted.attempt, adopted.adopted_from, adopted.step) == (crashed.gang, 2, 1, crashed.step)
    assert adopted.reservation_deadline == later + 600
    assert "adopting" in explanation


def test_start_window_is_checked_before_adopting() -> None:
    crashed, _ = plan(1, [], start_by=timedelta(hours=1))
    with pytest.raises(NoTry) as caught:
        adopt(
            crashed,
            try_number=2,
            start_deadline=window(timedelta(hours=1)),
            reservation_timeout_seconds=600,
            now=NOW + 2 * 3600,
        )
    assert caught.value.reason is Reason.START_WINDOW_MISSED


def test_adopted_try_keeps_the_start_window_as_its_limit() -> None:
    crashed, _ = plan(1, [], start_by=timedelta(minutes=20))
    adopted, _ = adopt(
        crashed,
        try_number=2,
        start_deadline=window(timedelta(minutes=20)),
        reservation_timeout_seconds=600,
        now=NOW + 15 * 60,
    )
    assert adopted.reservation_deadline == NOW + 20 * 60
    assert adopted.deadline_reason is Reason.START_WINDOW_MISSED


def test_killed_tries_are_no_ladder_input() -> None:
    records = [record(1, Reason.CAPACITY_NOT_FOUND), record(2, Reason.KILLED, 0)]
    chosen, _ = plan(3, records)
    assert chosen.step == "other zone zone-b"  # try 2 was killed: its step is still unused
    assert [item.attempt for item in current_sequence(records)] == [1]


def test_a_stored_ladder_outlives_an_edit_of_the_dag() -> None:
    stored = LADDER
    edited = (ShrinkTo(2), OtherZone("zone-c"))
    chosen, explanation = plan(2, [record(1, Reason.CAPACITY_NOT_FOUND, ladder=stored)], ladder=edited)
    assert chosen.step == "other zone zone-b" and chosen.ladder == stored
    assert "keeps the ladder it started with" in explanation
    fresh, _ = plan(
        3,
        [record(1, Reason.CAPACITY_NOT_FOUND, ladder=stored), record(2, Reason.ALL_SUCCEEDED, 0, ladder=stored)],
        ladder=edited,
    )
    assert fresh.ladder == tuple(edited)  # a new sequence takes the edited ladder


def test_without_fallbacks_retries_repeat_the_gang() -> None:
    assert effective_ladder((), 2) == (RetryAsIs(), RetryAsIs())
    assert effective_ladder(LADDER, 5) == LADDER


def test_sequence_restarts_after_a_try_that_cannot_be_retried() -> None:
    records = [record(1, Reason.DEADLINE), record(2, Reason.START_WINDOW_MISSED), record(3, Reason.DEADLINE)]
    assert [item.attempt for item in current_sequence(records)] == [3]


def test_a_step_that_cannot_apply_to_the_gang_is_no_try() -> None:
    with pytest.raises(NoTry, match="below min_size=4") as refused:
        plan(2, [record(1, Reason.CAPACITY_NOT_FOUND)], ladder=(ShrinkTo(2),))
    assert refused.value.reason is Reason.INVALID


def test_a_clamped_shrink_says_the_size_it_gave() -> None:
    chosen, _ = plan(2, [record(1, Reason.CAPACITY_NOT_FOUND)], ladder=(ShrinkTo(6, divisible_by=4),))
    assert chosen.step == "shrink to 6 members (a multiple of 4), ran 4" and chosen.spec.size == 4
    assert describe_step(None, build_spec()) == "as configured"


def test_a_sequence_planned_with_the_dag_s_ladder_says_nothing_about_it() -> None:
    _, explanation = plan(2, [record(1, Reason.CAPACITY_NOT_FOUND, ladder=LADDER)])
    assert "keeps the ladder" not in explanation


CHECKPOINT = Checkpoint("gs://bucket/run")
RESUMES = [
    ("first-try-afresh", 1, [], None),
    (
        "resumes-from-the-reported-step",
        2,
        [dataclasses.replace(record(1, Reason.SPOT_PREEMPTED), checkpoint_step=20)],
        20,
    ),
    ("no-report-stays-afresh", 2, [record(1, Reason.SPOT_PREEMPTED)], None),
]


@pytest.mark.parametrize(
    ("try_number", "records", "resume"), [row[1:] for row in RESUMES], ids=[row[0] for row in RESUMES]
)
def test_a_checkpointed_gang_resumes_from_the_latest_report(
    try_number: int, records: list[TryRecord], resume: int | None
) -> None:
    chosen, explanation = plan(try_number, records, ladder=(RetryAsIs(),), checkpoint=CHECKPOINT)
    assert chosen.spec.checkpoint == Checkpoint("gs://bucket/run", try_number=try_number, resume_step=resume)
    assert ("GANG_RESUME=1" in explanation) is (resume is not None)


def _unread(*reports: tuple[int | None, ReportGap]) -> tuple[UnreadReport, ...]:
    return tuple(UnreadReport(rank, gap, "detail") for rank, gap in reports)


def test_a_try_that_could_not_read_reports_says_so_in_the_next_plan() -> None:
    lost = dataclasses.replace(record(1, Reason.SPOT_PREEMPTED), unread_reports=_unread((0, ReportGap.DELETE_FAILED)))
    chosen, explanation = plan(2, [lost], ladder=(RetryAsIs(),), checkpoint=CHECKPOINT)
    assert chosen.spec.checkpoint is not None and chosen.spec.checkpoint.resume_step is None
    assert (
        "no earlier try of this run reported a checkpoint (try 1 could not read the reports of ranks [0] (not "
        "stopped: the delete failed past the client's retries)), so members start afresh (GANG_RESUME unset)"
    ) in explanation


def test_reports_unread_since_the_last_checkpoint_are_named_beside_the_resume() -> None:
    reported = dataclasses.replace(
        record(1, Reason.SPOT_PREEMPTED), checkpoint_step=20, unread_reports=_unread((3, ReportGap.GONE_UNSEEN))
    )
    unread = _unread((0, ReportGap.NOT_SEEN_STOPPED), (None, ReportGap.NOT_SEEN_STOPPED), (2, ReportGap.WATCH_FAILED))
    later = dataclasses.replace(record(2, Reason.SPOT_PREEMPTED), unread_reports=unread)
    chosen, explanation = plan(3, [reported, later], ladder=(RetryAsIs(times=2),), checkpoint=CHECKPOINT)
    assert chosen.spec.checkpoint is not None and chosen.spec.checkpoint.resume_step == 20
    assert explanation.endswith(
        "members resume from the checkpoint at step 20 that try 1 reported (GANG_RESUME=1); a newer one may "
        "exist: try 1 could not read the reports of ranks [3] (the pod was removed before its terminated state "
        "was seen); try 2 could not read the reports of ranks [0, ?] (not seen terminated within the grace period "
        "and the margin after it); ranks [2] (the members could not be listed or watched)"
    ), explanation
    older = dataclasses.replace(record(1, Reason.SPOT_PREEMPTED), unread_reports=_unread((3, ReportGap.GONE_UNSEEN)))
    newer = dataclasses.replace(record(2, Reason.SPOT_PREEMPTED), checkpoint_step=30)
    _, explanation = plan(3, [older, newer], ladder=(RetryAsIs(times=2),), checkpoint=CHECKPOINT)
    assert "could not read" not in explanation  # try 1's unread reports are older than try 2's checkpoint


def test_the_start_window_is_anchored_at_the_interval_end_else_the_run_s_start() -> None:
    anchor = datetime.fromtimestamp(NOW, timezone.utc)
    hour = timedelta(hours=1)
    assert start_window_end({"data_interval_end": anchor}, None) is None
    assert start_window_end({"dag_run": SimpleNamespace(run_after=anchor)}, hour) == NOW + 3600
    assert start_window_end({"dag_run": None}, hour) is None
    assert start_window_end({"data_interval_end": "not a time"}, hour) is None

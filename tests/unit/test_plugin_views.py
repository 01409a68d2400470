"""The Gang view's timeline, units, members and header, and the Gangs page's rows, from records the
provider's own types write (``reservation.records.tries``): pure, through ``gang_view.build_page``,
``gangs_page.build_overview`` and the rendered HTML."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from airflow_provider_gang.plugin import gangs_page, timeline, wording
from airflow_provider_gang.plugin.gang_view import build_page, headline
from airflow_provider_gang.plugin.live import describe_group
from airflow_provider_gang.plugin.members_table import LivePod, members
from airflow_provider_gang.plugin.rendering import render_overview, render_page
from airflow_provider_gang.plugin.stored_records import (
    GangTaskRow,
    StoredTaskState,
    TaskInstanceRow,
    WatchedReservation,
)
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from tests.builders import gang_spec

PLAN = TryPlan(
    attempt=3,
    gang="nightly-train-t3-abc",
    step="other zone (us-central1-b)",
    step_index=0,
    spec=gang_spec(name="nightly-train-t3-abc", zone="us-central1-b"),
    requested_at=10_000.0,
    reservation_deadline=13_600.0,
    deadline_reason=Reason.START_WINDOW_MISSED,
    start_deadline=12_400.0,
)
WAITED = TryRecord(
    attempt=1,
    gang="nightly-train-t1-abc",
    step="as configured",
    step_index=None,
    mode="provisioning_request",
    size=8,
    outcome="capacity_not_found",
    message="ProvisioningRequest nightly-train-t1-abc failed (CapacityIsNotFound)",
    retryable=True,
    queue_seconds=1200.0,
)
RAN = dataclasses.replace(
    WAITED,
    attempt=2,
    gang="nightly-train-t2-abc",
    outcome="member_exit_fails_for_good",
    message="rank 3 exited with 2",
    queue_seconds=30.0,
    provisioning_seconds=6.87,
    run_seconds=3 * 3600.0,
    gpu_seconds_reserved=8 * 3 * 3600.0 + 400,
    gpu_seconds_used=8 * 3 * 3600.0,
    gpu_seconds_idle=400.0,
    exit_codes={"0": 0, "1": 0, "3": 2},
    exit_code_decision={
        "rank": 3,
        "exit_code": 2,
        "rule": "fail_on_exit_codes",
        "reason": "member_exit_fails_for_good",
    },
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "not reached"),
        (0.00606751, "0.006 s"),
        (6.87348, "6.9 s"),
        (42.4, "42 s"),
        (725, "12 min 05 s"),
        (3720, "1 h 02 min"),
        (3 * 86400 + 4 * 3600, "3 d 4 h"),
        (-5, "0 s"),
    ],
)
def test_durations_read_as_people_say_them(seconds: float | None, text: str) -> None:
    assert wording.duration(seconds) == text


@pytest.mark.parametrize(
    ("gpu_seconds", "text"),
    [(0.012324 * 3600, "0.012 GPU-h"), (9000, "2.5 GPU-h"), (0, "0 GPU-h"), (460800, "128 GPU-h")],
)
def test_gpu_hours_read_as_gpu_hours(gpu_seconds: float, text: str) -> None:
    assert wording.gpu_hours(gpu_seconds) == text


def test_the_timeline_has_one_lane_per_try_coloured_by_outcome_with_the_start_by_limit() -> None:
    drawn = timeline.build_timeline([WAITED, RAN], TryState(plan=PLAN), now=10_600.0)
    assert drawn is not None
    assert [(lane.attempt, lane.tone) for lane in drawn.lanes] == [(1, "failed"), (2, "failed"), (3, "active")]
    assert [segment.stage for segment in drawn.lanes[1].segments] == ["waiting", "provisioning", "running"]
    assert drawn.lanes[1].segments[2].title == "running 3 h 00 min"
    assert drawn.lanes[2].end_x is None and drawn.lanes[0].end_x is not None  # the try in progress is open
    assert "zone us-central1-b" in drawn.lanes[2].place and "8 members" in drawn.lanes[0].detail
    assert drawn.lanes[2].limit is not None and drawn.lanes[2].limit.text == "start_by limit (40 min 00 s)"
    # The longest lane (3 h) sets the scale; a 6.9 s stage still shows.
    assert all(segment.width >= timeline.MINIMUM_SEGMENT for lane in drawn.lanes for segment in lane.segments)
    assert drawn.lanes[1].segments[2].width > 8 * drawn.lanes[0].segments[0].width


def test_no_try_no_timeline() -> None:
    assert timeline.build_timeline([], None, now=0.0) is None


def test_a_failed_page_says_why_in_words_with_the_exit_code_decision() -> None:
    page = build_page(
        "nightly",
        "r",
        "train",
        {},
        TaskInstanceRow(True, state="failed", try_number=2),
        StoredTaskState(tries=[WAITED.to_dict(), RAN.to_dict()]),
        now=20_000.0,
    )
    assert page.failure == (
        "Try 2 ended: member exit fails for good. Rank 3 exited with code 2; fail on exit codes decided:"
        " member exit fails for good. rank 3 exited with 2."
    )
    assert page.headline.startswith("Failed for good after 2 tries: Try 2 ended")
    assert [bar.used for bar in page.gpu_bars] == ["0 GPU-h", "24 GPU-h"]
    assert [(member.rank, member.exit_code, member.phase) for member in page.members] == [
        ("0", "0", "Succeeded"),
        ("1", "0", "Succeeded"),
        ("3", "2", "Failed"),
    ]
    html = render_page(page)
    assert len(re.findall(r'<g class="lane ', html)) == 2
    assert 'id="failure"' in html and "http-equiv" not in html
    assert 'href="/dags/nightly/runs/r/tasks/train?try_number=2"' in html


def test_a_waiting_try_says_how_long_and_what_happens_next() -> None:
    text = headline("deferred", "execute_reserved", [WAITED], TryState(plan=PLAN), now=10_720.0)
    assert text == (
        "Try 3 has waited 12 min 00 s for a reservation of 4 members in zone us-central1-b; the gang launches"
        " as soon as the cluster grants it, or the try gives up (start window missed) in 48 min 00 s."
    )


def test_live_pods_fill_the_members_table_and_logged_ranks_link_to_the_log() -> None:
    pods = [
        LivePod(1, "g-1", None, "Pending", None, 0),
        LivePod(0, "g-0", "node-a", "Running", None, 2),
    ]
    rows = members(pods, {}, frozenset({"0"}), "/dags/d/runs/r/tasks/t?try_number=1", "g")
    assert [(row.rank, row.node, row.exit_code, row.restarts, row.log_url is not None) for row in rows] == [
        ("0", "node-a", "still running", "2", True),
        ("1", "not bound yet", "not exited", "0", False),
    ]


def gang_row(dag_id: str, state: str, stored: dict[str, object], run_id: str = "r") -> GangTaskRow:
    return GangTaskRow(
        dag_id, run_id, "train", -1, state, None, 1, None, {key: json.dumps(value) for key, value in stored.items()}
    )


def test_the_gangs_page_lists_every_dag_longest_wait_first_and_filters() -> None:
    rows = [
        gang_row(
            "short", "deferred", {CURRENT_KEY: TryState(plan=dataclasses.replace(PLAN, requested_at=10_500)).to_dict()}
        ),
        gang_row("long", "deferred", {CURRENT_KEY: TryState(plan=PLAN).to_dict()}),
        gang_row("done", "failed", {TRIES_KEY: [WAITED.to_dict(), RAN.to_dict()]}),
        gang_row("broken", "success", {TRIES_KEY: [{"version": 99}]}),
    ]
    conditions = {("long", "r", "train", -1): "ProvisioningRequest Provisioned=False (<quota>)"}
    page = gangs_page.build_overview(rows, now=10_600.0, conditions=conditions)
    assert [(row.dag_id, row.phase, row.waited) for row in page.rows] == [
        ("long", "waiting", "10 min 00 s so far"),
        ("short", "waiting", "1 min 40 s so far"),
        ("done", "failed", "30 s"),
        ("broken", "succeeded", "not recorded"),
    ]
    assert page.rows[0].condition == "ProvisioningRequest Provisioned=False (<quota>)"
    assert page.rows[0].place == "zone us-central1-b · class check-capacity.autoscaling.x-k8s.io"
    assert page.rows[2].gpu_hours == "24 GPU-h used"
    assert page.rows[2].place == "step: as configured"  # recorded before the place was kept
    placed = dataclasses.replace(RAN, requested_at=9_000.0, zone="europe-west4-b", queue="team-a")
    assert gangs_page.finished_place(placed) == "zone europe-west4-b · queue team-a"
    assert dict(page.counts)["waiting"] == 2
    filtered = gangs_page.build_overview(rows, now=10_600.0, phase_filter="waiting", dag_filter="short")
    assert [row.dag_id for row in filtered.rows] == ["short"]
    html = render_overview(page)
    assert html.count('class="gang-row"') == 4 and "&lt;quota&gt;" in html


def test_one_list_per_kind_is_matched_back_to_each_gang() -> None:
    def watched(request: str | None, selector: str | None) -> WatchedReservation:
        return WatchedReservation("default", "c", None, request, selector, {})

    gangs = {("a", "r", "t", -1): watched("pr-a", None), ("b", "r", "t", -1): watched(None, "job-uid=2")}
    requests = [{"metadata": {"name": "pr-a"}, "status": {"conditions": [{"type": "Provisioned", "status": "False"}]}}]
    workloads = [
        {"metadata": {"name": "w1", "labels": {"job-uid": "1"}}},
        {"metadata": {"name": "w2", "labels": {"job-uid": "2"}}},
    ]
    found = describe_group(gangs, requests, workloads)
    assert "Provisioned=False" in found[("a", "r", "t", -1)]
    assert "w2" in found[("b", "r", "t", -1)] and "w1" not in found[("b", "r", "t", -1)]
    both = {("c", "r", "t", -1): watched(None, "a=1,b==2")}
    labelled = [
        {"metadata": {"name": "w3", "labels": {"a": "1", "b": "2"}}},
        {"metadata": {"name": "w4", "labels": {"a": "1", "b": "3"}}},
    ]
    matched = describe_group(both, [], labelled)[("c", "r", "t", -1)]
    assert "w3" in matched and "w4" not in matched


def test_a_try_airflow_ended_before_it_recorded_gets_a_lane_and_says_so() -> None:
    """Try 2 left ``gang.current`` behind (Airflow failed the task instance); try 1's record was
    overwritten by a try 3 that never stored anything: every Airflow try still gets its lane."""
    page = build_page(
        "nightly",
        "r",
        "train",
        {},
        TaskInstanceRow(True, state="failed", try_number=3),
        StoredTaskState(tries=[], current=TryState(plan=dataclasses.replace(PLAN, attempt=2)).to_dict()),
        now=20_000.0,
        past_tries=[1, 2],
    )
    assert page.timeline is not None
    assert [(lane.attempt, lane.tone, lane.outcome) for lane in page.timeline.lanes] == [
        (1, "failed", timeline.UNRECORDED),
        (2, "failed", timeline.UNRECORDED),
    ]
    # The try left behind still shows its plan's start_by limit; the one with no record left has none.
    assert [None if lane.limit is None else lane.limit.text for lane in page.timeline.lanes] == [
        None,
        "start_by limit (40 min 00 s)",
    ]
    assert page.failure is not None and page.failure.startswith("Try 2 ended without recording how")
    assert page.members_note == "Not recorded: the try ended before it recorded its members."

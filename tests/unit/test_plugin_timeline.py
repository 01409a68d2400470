"""The timeline's stages, places, ``start_by`` limits and legend, from records the provider's own
types write (``reservation.records.tries``): built by ``timeline.build_timeline`` and rendered
through ``gang_view.build_page`` and ``rendering.render_page``."""

from __future__ import annotations

import dataclasses
import re

import pytest

from airflow_provider_gang.plugin import timeline
from airflow_provider_gang.plugin.gang_view import build_page
from airflow_provider_gang.plugin.rendering import render_page
from airflow_provider_gang.plugin.stored_records import StoredTaskState, TaskInstanceRow
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from tests.builders import gang_spec

REQUESTED = 50_000.0
NEVER_GRANTED = TryRecord(
    attempt=1,
    gang="nightly-train-t1-abc",
    step="as configured",
    step_index=None,
    mode="provisioning_request",
    size=8,
    outcome="capacity_not_found",
    message="ProvisioningRequest nightly-train-t1-abc failed (CapacityIsNotFound)",
    retryable=True,
    requested_at=REQUESTED,
    start_deadline=REQUESTED + 3600,
    zone="us-central1-a",
    provisioning_class="queued-provisioning.gke.io",
    teardown_started_at=REQUESTED + 1200,
    teardown_ended_at=REQUESTED + 1204,
)
RAN = dataclasses.replace(
    NEVER_GRANTED,
    attempt=2,
    gang="nightly-train-t2-abc",
    step="other zone (us-central1-b)",
    step_index=0,
    outcome="all_succeeded",
    message="ended: all_succeeded",
    retryable=False,
    queue_seconds=30.0,
    provisioning_seconds=6.9,
    run_seconds=3 * 3600.0,
    requested_at=REQUESTED + 1300,
    start_deadline=REQUESTED + 3600,
    zone="us-central1-b",
    teardown_started_at=REQUESTED + 1300 + 30 + 6.9 + 3 * 3600 + 20,
    teardown_ended_at=REQUESTED + 1300 + 30 + 6.9 + 3 * 3600 + 32,
)
OLD = TryRecord(
    attempt=1,
    gang="nightly-train-t1-abc",
    step="as configured",
    step_index=None,
    mode="kueue",
    size=8,
    outcome="member_lost",
    message="1 of 8 lost: rank 3",
    retryable=True,
    queue_seconds=60.0,
    provisioning_seconds=5.0,
    run_seconds=600.0,
)
"""A record as releases before the teardown and place were kept wrote it."""
PLAN = TryPlan(
    attempt=3,
    gang="nightly-train-t3-abc",
    step="as configured",
    step_index=None,
    spec=gang_spec(name="nightly-train-t3-abc", mode="kueue"),
    requested_at=REQUESTED,
    reservation_deadline=REQUESTED + 7200,
    deadline_reason=Reason.DEADLINE,
    start_deadline=REQUESTED + 1800,
)


def stages(lane: timeline.Lane) -> list[str]:
    return [segment.stage for segment in lane.segments]


def test_a_finished_lane_ends_with_its_teardown_where_it_began() -> None:
    drawn = timeline.build_timeline([NEVER_GRANTED, RAN], None, now=REQUESTED + 20_000)
    assert drawn is not None
    never, ran = drawn.lanes
    assert stages(ran) == ["waiting", "provisioning", "running", "teardown"]
    assert ran.segments[3].title == "tearing down 12 s"
    running, teardown = ran.segments[2], ran.segments[3]
    assert teardown.x > running.x + running.width  # 20 s of reading logs before it: a gap
    assert ran.end_x == pytest.approx(teardown.x + teardown.width)
    # Never granted: it waited until its teardown began (the record has no queue_seconds).
    assert stages(never) == ["waiting", "teardown"]
    assert never.segments[0].title == "waiting 20 min 00 s"
    assert never.segments[1].x == pytest.approx(never.segments[0].x + never.segments[0].width, abs=0.2)


def test_every_finished_lane_shows_its_place_and_its_start_by_limit() -> None:
    drawn = timeline.build_timeline([NEVER_GRANTED, RAN], None, now=REQUESTED + 20_000)
    assert drawn is not None
    never, ran = drawn.lanes
    assert never.place == "provisioning request · zone us-central1-a · class queued-provisioning.gke.io"
    assert ran.place == "provisioning request · zone us-central1-b · class queued-provisioning.gke.io"
    assert never.limit is not None and never.limit.text == "start_by limit (1 h 00 min)"
    assert ran.limit is not None and ran.limit.text == "start_by limit (38 min 20 s)"  # measured from its own request
    assert ran.limit.x < never.limit.x


def test_a_record_of_an_older_release_draws_as_before() -> None:
    """No teardown, no limit, the place from the summary when the page has one, else the mode."""
    drawn = timeline.build_timeline([OLD], None, now=REQUESTED, places={1: "zone z · queue team-a"})
    assert drawn is not None
    (lane,) = drawn.lanes
    assert stages(lane) == ["waiting", "provisioning", "running"]
    assert (lane.limit, lane.place, lane.end_x is not None) == (None, "kueue · zone z · queue team-a", True)
    without_summary = timeline.build_timeline([OLD], None, now=REQUESTED)
    assert without_summary is not None and without_summary.lanes[0].place == "kueue"


def test_a_try_tearing_down_has_an_open_teardown_since_it_began() -> None:
    state = TryState(plan=PLAN, launched_at=REQUESTED + 100, teardown_started_at=REQUESTED + 700)
    drawn = timeline.build_timeline([], state, now=REQUESTED + 730)
    assert drawn is not None
    (lane,) = drawn.lanes
    assert (lane.heading, lane.tone, lane.end_x) == ("try 3 · tearing down", "active", None)
    assert [(segment.stage, segment.title) for segment in lane.segments] == [
        ("waiting", "waiting 1 min 40 s"),
        ("running", "running 10 min 00 s"),
        ("teardown", "tearing down 30 s"),
    ]
    assert lane.place == "kueue · any zone · queue lq"
    assert lane.limit is not None and lane.limit.text == "start_by limit (30 min 00 s)"


def test_the_limit_sets_the_scale_when_it_is_the_furthest_mark() -> None:
    drawn = timeline.build_timeline([], TryState(plan=PLAN), now=REQUESTED + 60)
    assert drawn is not None and drawn.lanes[0].limit is not None
    assert drawn.lanes[0].segments[0].x + drawn.lanes[0].segments[0].width < drawn.lanes[0].limit.x <= timeline.WIDTH


def test_the_page_draws_the_teardown_the_limits_and_a_legend_of_every_mark() -> None:
    page = build_page(
        "nightly",
        "r",
        "train",
        {},
        TaskInstanceRow(True, state="success", try_number=2),
        StoredTaskState(tries=[NEVER_GRANTED.to_dict(), RAN.to_dict()]),
        now=REQUESTED + 20_000,
    )
    html = render_page(page)
    assert html.count('class="stage-teardown fill-failed"') == 1
    assert html.count('class="stage-teardown fill-succeeded"') == 1
    assert html.count('<line class="limit"') == 2 and html.count('class="end-mark') == 2
    legend = html.split('id="timeline-legend"')[1].split("</div>")[0]
    marks = re.findall(r'data-mark="([\w-]+)"><span class="swatch swatch-\1"></span>([^<]+)</span>', legend)
    assert [text for _, text in marks] == [item.text for item in timeline.LEGEND]
    assert {mark for mark, _ in marks} >= {
        "stage-waiting",
        "stage-provisioning",
        "stage-running",
        "stage-teardown",
        "end",
        "limit",
        "tone-succeeded",
        "tone-failed",
        "tone-active",
    }
    assert dict(marks)["end"] == "end of the try"
    # Every mark the legend names has a style of its own; its colours are the theme's (light and dark).
    styles = html.split("<style>")[1].split("</style>")[0]
    for mark, _ in marks:
        rule = re.search(r"\.swatch-" + mark + r"\{([^}]*)\}", styles)
        assert rule is not None, mark
        assert "#" not in rule.group(1), rule.group(1)  # a colour comes from a theme variable

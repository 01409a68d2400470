"""A topology gang in the UI: the Gang view says why a try waits (what the room on the nodes said) and
where it is pinned, and where each rank ran; the Gangs page puts both in its place and condition
columns. Built from stored records (``plugin.gang_view``, ``plugin.gangs_page``) and rendered."""

from __future__ import annotations

import dataclasses
import json

from airflow_provider_gang.plugin import gangs_page
from airflow_provider_gang.plugin.gang_view import build_page
from airflow_provider_gang.plugin.rendering import render_overview, render_page
from airflow_provider_gang.plugin.stored_records import GangTaskRow, StoredTaskState, TaskInstanceRow
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.task_state import CURRENT_KEY, TRIES_KEY
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from airflow_provider_gang.reservation.topology.labels import SUBBLOCK
from airflow_provider_gang.reservation.topology.pins import Placement
from tests.builders import gang_spec

WHY = "no rack has room for 4 members (1 nvidia.com/gpu each); the best, rack-b1, has room for 2 (room: rack-b1 2)"
GROWING = TryState(
    plan=TryPlan(
        attempt=1,
        gang="train-t1-abc",
        step="as configured",
        step_index=None,
        spec=gang_spec(
            name="train-t1-abc",
            mode="gates",
            required_topology=SUBBLOCK,
            placement=Placement(SUBBLOCK, ("rack-b1",), grows=True, note=WHY),
        ),
        requested_at=10_000.0,
        reservation_deadline=13_600.0,
        deadline_reason=Reason.DEADLINE,
        start_deadline=None,
    ),
    topology_note=WHY,
)
RAN = TryRecord(
    attempt=1,
    gang="train-t1-abc",
    step="as configured",
    step_index=None,
    mode="kueue",
    size=4,
    outcome="all_succeeded",
    message="all 4 members succeeded",
    retryable=False,
    requested_at=10_000.0,
    queue="tas",
    exit_codes={"0": 0, "1": 0, "2": 0, "3": 0},
    required_topology=SUBBLOCK,
    rank_nodes={"0": "h1", "1": "h1", "2": "h2", "3": "h2"},
    rank_domains=dict.fromkeys(["0", "1", "2", "3"], "rack-y1"),
)


def test_the_gang_view_says_why_a_try_waits_and_where_it_is_pinned() -> None:
    page = build_page(
        "d",
        "r",
        "train",
        {},
        TaskInstanceRow(True, state="deferred", try_number=1),
        StoredTaskState(current=GROWING.to_dict()),
        now=10_100.0,
    )
    (waiting,) = [table for table in page.tables if table.title == "Waiting"]
    rows = dict(waiting.rows)
    assert rows["topology"] == f"required {SUBBLOCK}"
    assert rows["pinned to"] == "capacity asked in rack rack-b1"
    assert rows["room on the nodes"] == WHY
    assert page.domain_label == SUBBLOCK
    html = render_page(page)
    assert "the best, rack-b1, has room for 2" in html


def test_the_gang_view_shows_the_domain_each_rank_ran_in() -> None:
    page = build_page(
        "d",
        "r",
        "train",
        {},
        TaskInstanceRow(True, state="success", try_number=1),
        StoredTaskState(tries=[RAN.to_dict()]),
        now=20_000.0,
    )
    assert [(member.rank, member.node, member.domain) for member in page.members] == [
        ("0", "h1 (pod removed)", "rack-y1"),
        ("1", "h1 (pod removed)", "rack-y1"),
        ("2", "h2 (pod removed)", "rack-y1"),
        ("3", "h2 (pod removed)", "rack-y1"),
    ]
    html = render_page(page)
    assert f'<th title="{SUBBLOCK}">domain</th>' in html and "<td>rack-y1</td>" in html


def test_a_gang_without_a_topology_has_no_domain_column() -> None:
    plain = dataclasses.replace(RAN, required_topology=None, rank_domains={})
    page = build_page(
        "d",
        "r",
        "train",
        {},
        TaskInstanceRow(True, state="success", try_number=1),
        StoredTaskState(tries=[plain.to_dict()]),
        now=20_000.0,
    )
    assert page.domain_label == "" and ">domain</th>" not in render_page(page)


def row(dag_id: str, state: str, stored: dict[str, object]) -> GangTaskRow:
    return GangTaskRow(
        dag_id, "r", "train", -1, state, None, 1, None, {key: json.dumps(value) for key, value in stored.items()}
    )


def test_the_gangs_page_puts_the_pin_in_the_place_and_the_reason_in_the_condition() -> None:
    rows = [
        row("waits", "deferred", {CURRENT_KEY: GROWING.to_dict()}),
        row("ran", "success", {TRIES_KEY: [RAN.to_dict()]}),
    ]
    page = gangs_page.build_overview(
        rows, now=10_100.0, conditions={("waits", "r", "train", -1): "ProvisioningRequest Provisioned=False"}
    )
    waits, ran = page.rows
    assert waits.place.endswith("; capacity asked in rack rack-b1")
    assert waits.condition == f"ProvisioningRequest Provisioned=False; {WHY}"
    assert ran.place == "any zone · queue tas; rack-y1: ranks 0-3"
    assert "rack-y1: ranks 0-3" in render_overview(page)

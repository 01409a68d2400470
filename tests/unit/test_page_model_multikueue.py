"""The Gang view and the Gangs page name the Kueue MultiKueue worker a try ran on, and say what cannot be
seen of a gang on a worker without a connection."""

from __future__ import annotations

import dataclasses
import json

from airflow_provider_gang.plugin import gang_view, gangs_page, members_table, wording
from airflow_provider_gang.plugin.stored_records import GangTaskRow, StoredTaskState, TaskInstanceRow
from airflow_provider_gang.reservation.records import task_state
from tests.unit.reservation.records.examples import MULTIKUEUE_RECORD, MULTIKUEUE_STATE

UNMAPPED_RECORD = dataclasses.replace(MULTIKUEUE_RECORD, worker_kubernetes_conn_id=None)
UNMAPPED_STATE = dataclasses.replace(
    MULTIKUEUE_STATE,
    multikueue=dataclasses.replace(MULTIKUEUE_STATE.multikueue, worker_conn_id=None, worker_job_uid=None),  # type: ignore[arg-type]
)
NOW = MULTIKUEUE_STATE.plan.requested_at + 60


def test_a_try_row_names_its_worker_and_how_it_was_followed() -> None:
    assert gang_view.try_row(MULTIKUEUE_RECORD).cells[1] == (
        "as configured (MultiKueue worker worker-2, connection kube_worker2)"
    )
    assert gang_view.try_row(UNMAPPED_RECORD).cells[1] == "as configured (MultiKueue worker worker-2, no connection)"


def running_page(state: object) -> gang_view.Page:
    return gang_view.build_page(
        "team",
        "r",
        "train",
        {},
        TaskInstanceRow(exists=True, state="deferred", next_method="execute_finished", try_number=1),
        StoredTaskState(current=state.to_dict()),  # type: ignore[attr-defined]
        now=NOW,
    )


def test_the_waiting_table_names_the_worker_and_what_is_not_seen() -> None:
    rows = dict(next(table for table in running_page(MULTIKUEUE_STATE).tables if table.title == "Waiting").rows)
    assert rows["MultiKueue worker"] == "worker-2, followed through connection kube_worker2"
    unmapped = dict(next(table for table in running_page(UNMAPPED_STATE).tables if table.title == "Waiting").rows)
    assert unmapped["MultiKueue worker"].startswith("worker-2 - MultiKueue worker 'worker-2' has no connection")
    waiting = dataclasses.replace(
        MULTIKUEUE_STATE, multikueue=dataclasses.replace(UNMAPPED_STATE.multikueue, worker=None)
    )  # type: ignore[arg-type]
    rows = dict(next(table for table in running_page(waiting).tables if table.title == "Waiting").rows)
    assert rows["MultiKueue worker"] == "none admitted it yet (admission check 'multikueue')"


def test_the_members_table_says_what_a_worker_without_a_connection_hides() -> None:
    page = running_page(UNMAPPED_STATE)
    assert page.members == () and page.members_note.startswith("Not visible: MultiKueue worker 'worker-2'")
    rows, _, note, _ = members_table.members_section(None, None, [UNMAPPED_RECORD], {}, None, str, task_finished=True)
    assert rows == () and "no rank logs, no member detail" in note
    rows, _, note, _ = members_table.members_section(None, None, [MULTIKUEUE_RECORD], {}, None, str, task_finished=True)
    assert note == "No member ran in this try (no exit codes recorded)."


def test_the_timeline_and_the_gangs_page_place_a_try_on_its_worker() -> None:
    assert wording.place_of(None, "team", None, "worker-2") == "any zone · queue team · worker worker-2"
    assert wording.place_of("zone-a", None, None) == "zone zone-a"
    finished = GangTaskRow(
        "team",
        "r",
        "train",
        -1,
        "success",
        None,
        1,
        None,
        {task_state.TRIES_KEY: json.dumps([dataclasses.replace(MULTIKUEUE_RECORD, requested_at=NOW).to_dict()])},
    )
    assert gangs_page.build_row(finished, now=NOW, condition=None).place == "any zone · queue team · worker worker-2"
    running = GangTaskRow(
        "team",
        "r",
        "train",
        -1,
        "deferred",
        "execute_finished",
        1,
        7,
        {task_state.CURRENT_KEY: json.dumps(MULTIKUEUE_STATE.to_dict())},
    )
    assert gangs_page.build_row(running, now=NOW, condition=None).place == "any zone · queue team · worker worker-2"

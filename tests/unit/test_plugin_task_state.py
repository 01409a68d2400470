"""The Gang page's view of the task state store (``plugin.gang_view.build_page`` with ``task_state``),
for the states a real try stores: written here by the provider's own ``TryState`` / ``TryRecord``
records (``reservation.records.tries``), so the page reads the format ``operators.lifecycle``
writes; and which trigger rows the page reads live conditions for, from the kwargs the provider's
own trigger serializes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from airflow_provider_gang.plugin.gang_view import build_page
from airflow_provider_gang.plugin.live import read_live_conditions
from airflow_provider_gang.plugin.rendering import render_page
from airflow_provider_gang.plugin.stored_records import (
    StoredTaskState,
    TaskInstanceRow,
    TriggerRow,
    WatchedReservation,
    watched_reservation,
)
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from tests.builders import gang_event, gang_spec


def page_of(task_instance: TaskInstanceRow, state: dict[str, Any], *, now: float = 0.0, **options: Any) -> str:
    """The HTML of task ``train`` of run ``r`` of DAG ``nightly``, with no XComs."""
    return render_page(
        build_page("nightly", "r", "train", {}, task_instance, StoredTaskState(**state), now=now, **options)
    )


PLAN = TryPlan(
    attempt=2,
    gang="nightly-train-t2-abc",
    step="other zone",
    step_index=0,
    spec=gang_spec(name="nightly-train-t2-abc"),
    requested_at=1000.0,
    reservation_deadline=4600.0,
    deadline_reason=Reason.DEADLINE,
    start_deadline=None,
)
FAILED_FIRST = TryRecord(
    attempt=1,
    gang="nightly-train-t1-abc",
    step="as configured",
    step_index=None,
    mode="provisioning_request",
    size=8,
    outcome="capacity_not_found",
    message="ProvisioningRequest nightly-train-t1-abc failed (CapacityIsNotFound: no <nodes>)",
    retryable=True,
)


def test_a_try_waiting_for_its_reservation_shows_how_long_and_the_try_before_it() -> None:
    state = {"tries": [FAILED_FIRST.to_dict()], "current": TryState(plan=PLAN).to_dict()}
    page = page_of(
        TaskInstanceRow(True, state="deferred", next_method="execute_reserved", try_number=2),
        state,
        now=1000.0 + 42 * 60 + 7,
    )
    waiting = page.split("<h2>Waiting</h2>")[1].split("</table>")[0]
    assert "<dt>waiting for</dt><dd>42 min</dd>" in waiting
    assert "<dt>step</dt><dd>other zone</dd>" in waiting
    assert "<dt>stage</dt><dd>reservation requested, waiting for it to be granted</dd>" in waiting
    assert (
        "<td>capacity_not_found</td><td>ProvisioningRequest nightly-train-t1-abc failed "
        "(CapacityIsNotFound: no &lt;nodes&gt;)</td>" in page
    )  # escaped
    assert "No reservation recorded yet" not in page


def test_a_launched_try_waits_for_its_members_and_shows_its_reservation_event() -> None:
    current = TryState(
        plan=PLAN,
        launched_at=2000.0,
        size_run=4,
        reservation_event=gang_event(
            Reason.RESERVED, started_at=1000.0, event_at=1900.0, message="ProvisioningRequest provisioned"
        ),
    )
    page = page_of(
        TaskInstanceRow(True, state="deferred", next_method="execute_finished"),
        {"tries": [], "current": current.to_dict()},
        now=2030.0,
    )
    waiting = page.split("<h2>Waiting</h2>")[1].split("</table>")[0]
    assert "members launched, waiting for them to start and end" in waiting
    assert "<dt>waiting for</dt><dd>30 s</dd>" in waiting
    assert "<dt>reservation</dt><dd>reserved: ProvisioningRequest provisioned</dd>" in waiting


def test_a_try_waiting_for_a_retry_names_the_reason_the_last_one_failed() -> None:
    page = page_of(
        TaskInstanceRow(True, state="up_for_retry", try_number=1),
        {"tries": [FAILED_FIRST.to_dict()], "current": None},
    )
    assert (
        '<p class="status">Failed; waiting for the next try (try 1): try 1 ended capacity_not_found - '
        "ProvisioningRequest nightly-train-t1-abc failed (CapacityIsNotFound: no &lt;nodes&gt;)</p>"
    ) in page
    assert "<h2>Waiting</h2>" not in page


def test_a_recorded_try_whose_state_is_still_stored_is_not_shown_as_waiting() -> None:
    """``TryHistory.record`` appends the record before it drops ``gang.current``: between the two, the
    try is over."""
    record = dataclasses.replace(FAILED_FIRST, attempt=2)
    page = page_of(
        TaskInstanceRow(True, state="running"),
        {"tries": [record.to_dict()], "current": TryState(plan=PLAN).to_dict()},
        now=1001.0,
    )
    assert "<h2>Waiting</h2>" not in page


def test_conditions_read_from_the_cluster_are_shown_escaped_beside_the_wait() -> None:
    page = page_of(
        TaskInstanceRow(True, state="deferred", next_method="execute_reserved"),
        {"tries": [], "current": TryState(plan=PLAN).to_dict()},
        now=1010.0,
        conditions="ProvisioningRequest Accepted=True, Provisioned=False (Pending: <8> nodes)",
    )
    assert (
        "<dt>conditions now</dt><dd>ProvisioningRequest Accepted=True, Provisioned=False "
        "(Pending: &lt;8&gt; nodes)</dd>"
    ) in page


def test_only_a_gang_trigger_is_asked_for_conditions() -> None:
    assert watched_reservation(None) is None
    assert read_live_conditions(None) is None
    foreign = TriggerRow("airflow.triggers.temporal.DateTimeTrigger", {"moment": "2026-01-01"})
    assert watched_reservation(foreign) is None
    with pytest.raises(ValueError, match="does not wait on a gang"):
        watched_reservation(TriggerRow("airflow_provider_gang.triggers.events.PhaseClock", {"started_at": 0}))


def test_the_page_reads_the_watched_objects_from_what_the_trigger_serializes() -> None:
    trigger = ReservationTrigger(
        kubernetes_conn_id="gpu_cluster",
        gang_name="nightly-train-t1-abc",
        namespace="training",
        deadline=4600.0,
        mode="provisioning_request",
        size=8,
        started_at=1000.0,
        provisioning_request="nightly-train-t1-abc",
        client_options={"request_timeout": 7},
    )
    assert watched_reservation(TriggerRow(*trigger.serialize())) == WatchedReservation(
        namespace="training",
        kubernetes_conn_id="gpu_cluster",
        connection=None,
        provisioning_request="nightly-train-t1-abc",
        workload_selector=None,
        client_options={"request_timeout": 7},
    )

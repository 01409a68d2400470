"""Condition predicates read objects defensively; timestamps and reasons."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import conditions, phases, timestamps
from airflow_provider_gang.reservation.phases import Reason
from tests.builders import T0, member, provreq, stamp

PREDICATES = [
    ("none-has-no-conditions", conditions.has_no_conditions, None, True),
    ("empty-status", conditions.has_no_conditions, {"status": None}, True),
    ("garbage-conditions-ignored", conditions.has_no_conditions, {"status": {"conditions": ["x", 3]}}, True),
    ("handled", conditions.has_no_conditions, provreq().accepted().obj(), False),
    ("accepted", conditions.is_accepted, provreq().accepted().obj(), True),
    ("accepted-unknown", conditions.is_accepted, provreq().condition("Accepted", "Unknown").obj(), False),
    ("provisioned-false", conditions.is_provisioned, provreq().not_provisioned().obj(), False),
    (
        "booking-consumed-needs-true",
        conditions.is_booking_consumed,
        provreq().condition("BookingExpired", "False", "CapacityBookingConsumed").obj(),
        False,
    ),
    ("gate-present", lambda p: conditions.has_gate(p, "a/b"), member().gated("a/b").obj(), True),
    ("gate-other", lambda p: conditions.has_gate(p, "a/b"), member().gated("c/d").obj(), False),
    ("gate-garbage", lambda p: conditions.has_gate(p, "a/b"), {"spec": {"schedulingGates": ["a/b"]}}, False),
    ("bound", conditions.is_bound, member().bound().obj(), True),
    ("not-bound", conditions.is_bound, member().obj(), False),
    ("terminating", conditions.is_terminating, member().terminating().obj(), True),
    ("active-default", conditions.is_active, {"spec": {}}, True),
    ("active-none", conditions.is_active, None, True),
]


@pytest.mark.parametrize(("predicate", "obj", "expected"), [c[1:] for c in PREDICATES], ids=[c[0] for c in PREDICATES])
def test_predicates(predicate, obj, expected):
    assert predicate(obj) is expected


def test_repeated_condition_reads_the_last():
    obj = {"status": {"conditions": [{"type": "Failed", "status": "False"}, {"type": "Failed", "status": "True"}]}}
    assert conditions.is_failed(obj)


MESSAGES = [
    ("absent", provreq().obj(), ""),
    ("reason-and-message", provreq().failed("Expired", "too old").obj(), "Expired: too old"),
    ("reason-only", provreq().condition("Failed", reason="Expired").obj(), "Expired"),
    ("message-only", provreq().condition("Failed", message="too old").obj(), "too old"),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in MESSAGES], ids=[c[0] for c in MESSAGES])
def test_condition_message(obj, expected):
    assert conditions.condition_message(obj, "Failed") == expected


TIMES = [
    ("zulu", stamp(5), T0 + 5),
    ("offset", "2026-01-01T01:00:00+01:00", 1767225600.0),
    ("naive-is-utc", "2026-01-01T00:00:00", 1767225600.0),
    ("fractional", "2026-01-01T00:00:00.5Z", 1767225600.5),
    ("garbage", "yesterday", None),
    ("empty", "", None),
    ("not-a-string", 5, None),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in TIMES], ids=[c[0] for c in TIMES])
def test_parse_time(text, expected):
    assert timestamps.parse_time(text) == expected


def test_format_time_round_trips():
    assert timestamps.format_time(1767225600.0) == "2026-01-01T00:00:00Z"
    assert timestamps.parse_time(timestamps.format_time(T0)) == T0


RETRYABLE = [
    (Reason.CAPACITY_NOT_FOUND, True),
    (Reason.DEADLINE, True),
    (Reason.BOOKING_EXPIRED, True),
    (Reason.CAPACITY_REVOKED, True),
    (Reason.KUEUE_REJECTED, True),
    (Reason.MEMBER_FAILED, True),
    (Reason.INVALID, False),
    (Reason.START_WINDOW_MISSED, False),
    (Reason.LADDER_EXHAUSTED, False),
    (Reason.RESERVED, False),
    (Reason.WAITING_FOR_CAPACITY, False),
]


@pytest.mark.parametrize(("reason", "expected"), RETRYABLE, ids=[r.value for r, _ in RETRYABLE])
def test_is_retryable(reason, expected):
    assert phases.is_retryable(reason) is expected


def test_reason_values_are_a_stored_format():
    # Renaming a value breaks already-deferred tasks; this list only ever grows.
    assert {reason.value for reason in Reason} >= {
        "not_handled_yet",
        "waiting_for_capacity",
        "waiting_for_quota",
        "waiting_for_admission_checks",
        "waiting_for_objects",
        "members_starting",
        "members_running",
        "reserved",
        "all_succeeded",
        "capacity_not_found",
        "provisioning_failed",
        "booking_expired",
        "capacity_revoked",
        "kueue_rejected",
        "kueue_retry",
        "workload_deactivated",
        "evicted",
        "preempted",
        "workload_finished",
        "reservation_gone",
        "deadline",
        "member_failed",
        "member_lost",
        "invalid",
        "start_window_missed",
        "ladder_exhausted",
    }
    assert Reason("deadline") is Reason.DEADLINE and Reason.DEADLINE == "deadline"

"""The fallback ladder: which step each try takes and why, and how tries are summarized."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import fallback, ladder_choice, ladder_format
from airflow_provider_gang.reservation.fallback import (
    OnDemand,
    OtherProvisioningClass,
    OtherQueue,
    OtherZone,
    RetryAsIs,
    ShrinkTo,
)
from airflow_provider_gang.reservation.ladder_choice import TryOutcome
from airflow_provider_gang.reservation.phases import Reason, is_ladder_input
from tests.builders import gang_spec

LADDER = (OtherZone("us-b"), ShrinkTo(4, divisible_by=2), RetryAsIs(), OnDemand())
R = Reason


def _history(*reasons_and_steps):
    return [TryOutcome(number, step, reason) for number, (reason, step) in enumerate(reasons_and_steps, start=1)]


CHOICES = [
    ("first-try-is-base", LADDER, 1, [], None, False),
    ("capacity-refused-other-zone", LADDER, 2, _history((R.CAPACITY_NOT_FOUND, None)), 0, False),
    ("deadline-after-zone-shrinks", LADDER, 3, _history((R.CAPACITY_NOT_FOUND, None), (R.DEADLINE, 0)), 1, False),
    ("member-failed-skips-to-retry", LADDER, 2, _history((R.MEMBER_FAILED, None)), 2, False),
    ("skipped-steps-stay-available", LADDER, 3, _history((R.MEMBER_FAILED, None), (R.CAPACITY_NOT_FOUND, 2)), 0, False),
    ("revoked-other-zone-first", LADDER, 2, _history((R.CAPACITY_REVOKED, None)), 0, False),
    ("preempted-first-matching-in-ladder-order", LADDER, 2, _history((R.PREEMPTED, None)), 2, False),
    ("preempted-passes-over-zone", (OtherZone("us-b"), OnDemand()), 2, _history((R.PREEMPTED, None)), 1, False),
    (
        "used-steps-not-reused",
        LADDER,
        4,
        _history((R.MEMBER_FAILED, None), (R.MEMBER_FAILED, 2), (R.SPOT_PREEMPTED, 3)),
        None,
        True,
    ),
    ("non-retryable-exhausts", LADDER, 2, _history((R.INVALID, None)), None, True),
    ("start-window-exhausts", LADDER, 2, _history((R.START_WINDOW_MISSED, None)), None, True),
    ("empty-ladder", (), 2, _history((R.DEADLINE, None)), None, True),
    ("history-lost-by-position", LADDER, 3, [], 1, False),
    (
        "history-gap-by-position",
        LADDER,
        3,
        [TryOutcome(1, None, R.DEADLINE)],
        1,
        False,
    ),
    ("history-lost-beyond-ladder", LADDER, 9, [], None, True),
    (
        "custom-applies-to",
        (RetryAsIs(applies_to=frozenset({R.DEADLINE})),),
        2,
        _history((R.MEMBER_FAILED, None)),
        None,
        True,
    ),
    (
        "custom-applies-to-strings",
        (RetryAsIs(applies_to=frozenset({"deadline"})),),
        2,
        _history((R.DEADLINE, None)),
        0,
        False,
    ),
    ("quota-other-queue", (OtherQueue("lq-2"),), 2, _history((R.KUEUE_REJECTED, None)), 0, False),
    (
        "class-on-capacity",
        (OtherProvisioningClass("queued-provisioning.gke.io"),),
        2,
        _history((R.PROVISIONING_FAILED, None)),
        0,
        False,
    ),
    ("history-of-later-tries-ignored", LADDER, 2, _history((R.PREEMPTED, None), (R.CAPACITY_NOT_FOUND, 3)), 2, False),
]


@pytest.mark.parametrize(
    ("ladder", "try_number", "history", "index", "exhausted"), [c[1:] for c in CHOICES], ids=[c[0] for c in CHOICES]
)
def test_choose_step(ladder, try_number, history, index, exhausted):
    choice = ladder_choice.choose_step(ladder, try_number, history)
    assert (choice.step_index, choice.exhausted) == (index, exhausted)
    assert choice.step is (None if index is None else ladder[index])
    assert choice.explanation.startswith(f"try {try_number}:")


def test_explanations_say_which_step_and_why():
    choice = ladder_choice.choose_step(LADDER, 2, _history((R.CAPACITY_NOT_FOUND, None)))
    assert choice.explanation == "try 2: step 1 (other zone us-b) because try 1 ended with capacity_not_found"
    by_position = ladder_choice.choose_step(LADDER, 3, [])
    assert "by position; the previous try's outcome is unknown" in by_position.explanation
    fixed = ladder_choice.choose_step(LADDER, 2, _history((R.INVALID, None)))
    assert "which no fallback step can fix" in fixed.explanation


def test_summary_lists_every_try():
    history = [
        TryOutcome(1, None, R.CAPACITY_NOT_FOUND, "no capacity in us-a"),
        TryOutcome(2, 0, R.DEADLINE),
        TryOutcome(3, 9, R.MEMBER_FAILED),
    ]
    assert ladder_choice.summarize(LADDER, history) == (
        "try 1 (as configured): capacity_not_found - no capacity in us-a; "
        "try 2 (step 1: other zone us-b): deadline; try 3 (as configured): member_failed"
    )
    assert ladder_choice.summarize(LADDER, []) == "no try finished"


def test_try_outcome_round_trips():
    outcome = TryOutcome(2, 1, R.BOOKING_EXPIRED, "expired")
    assert outcome.to_dict() == {
        "try_number": 2,
        "step_index": 1,
        "reason": "booking_expired",
        "message": "expired",
        "repeated": False,
        "node_reclaimed": False,
    }
    assert TryOutcome.from_dict(outcome.to_dict()) == outcome
    assert TryOutcome.from_dict({"try_number": 1, "reason": "deadline"}) == TryOutcome(1, None, R.DEADLINE)


def test_only_killed_and_lost_worker_tries_are_no_ladder_input() -> None:
    assert not is_ladder_input(Reason.KILLED) and not is_ladder_input(Reason.WORKER_LOST)
    assert all(is_ladder_input(reason) for reason in Reason if reason not in (Reason.KILLED, Reason.WORKER_LOST))


SPOT_LADDER = (RetryAsIs(times=2), OnDemand())


SPOT_CHOICES = [
    ("first-preemption-stays-on-spot", 2, [(R.SPOT_PREEMPTED, None)], 0, False),
    ("second-preemption-stays-on-spot", 3, [(R.SPOT_PREEMPTED, None), (R.SPOT_PREEMPTED, 0)], 0, False),
    (
        "third-preemption-leaves-spot",
        4,
        [(R.SPOT_PREEMPTED, None), (R.SPOT_PREEMPTED, 0), (R.SPOT_PREEMPTED, 0)],
        1,
        False,
    ),
    (
        "then-exhausted",
        5,
        [(R.SPOT_PREEMPTED, None), (R.SPOT_PREEMPTED, 0), (R.SPOT_PREEMPTED, 0), (R.SPOT_PREEMPTED, 1)],
        None,
        True,
    ),
    ("a-member-failure-also-uses-the-count", 3, [(R.MEMBER_FAILED, None), (R.SPOT_PREEMPTED, 0)], 0, False),
]


@pytest.mark.parametrize(
    ("try_number", "history", "index", "exhausted"), [c[1:] for c in SPOT_CHOICES], ids=[c[0] for c in SPOT_CHOICES]
)
def test_retry_as_is_is_used_up_to_its_count(try_number, history, index, exhausted) -> None:
    choice = ladder_choice.choose_step(SPOT_LADDER, try_number, _history(*history))
    assert (choice.step_index, choice.exhausted) == (index, exhausted)


def test_a_counted_step_says_which_use_it_is() -> None:
    choice = ladder_choice.choose_step(SPOT_LADDER, 3, _history((R.SPOT_PREEMPTED, None), (R.SPOT_PREEMPTED, 0)))
    assert choice.explanation == (
        "try 3: step 1 (retry as-is (up to 2 times), use 2 of 2) because try 2 ended with spot_preempted"
    )


def test_spot_preemption_is_retryable_and_on_demand_answers_it_by_default() -> None:
    assert R.SPOT_PREEMPTED in OnDemand().reasons
    assert R.SPOT_PREEMPTED in RetryAsIs().reasons
    assert R.SPOT_PREEMPTED not in OtherQueue("q").reasons


def test_history_lost_walks_counted_steps_by_position() -> None:
    assert [ladder_choice.choose_step(SPOT_LADDER, number, []).step_index for number in (2, 3, 4)] == [0, 0, 1]
    assert ladder_choice.choose_step(SPOT_LADDER, 5, []).exhausted
    assert fallback.tries_needed(SPOT_LADDER) == 3


@pytest.mark.parametrize("reason", [R.CAPACITY_NOT_FOUND, R.CAPACITY_REVOKED, R.PREEMPTED])
def test_a_reservation_answers_capacity_taken_away_and_says_which(reason: Reason) -> None:
    ladder = (fallback.UseReservation("a100-res"),)
    fallback.check_ladder(ladder, gang_spec(spot=True))
    choice = ladder_choice.choose_step(ladder, 2, [TryOutcome(1, None, reason)])
    assert choice.explanation == f"try 2: step 1 (use reservation a100-res) because try 1 ended with {reason.value}"
    assert ladder_choice.summarize(ladder, [TryOutcome(1, None, reason), TryOutcome(2, 0, R.DEADLINE)]).endswith(
        "try 2 (step 1: use reservation a100-res): deadline"
    )


def test_a_full_reservation_falls_back_to_on_demand_then_spot() -> None:
    ladder = (fallback.LeaveReservation(), fallback.LeaveReservation(spot=True))
    base = gang_spec(reservation_name="a100-res")
    fallback.check_ladder(ladder, base)
    first = ladder_choice.choose_step(ladder, 2, [TryOutcome(1, None, R.CAPACITY_NOT_FOUND)])
    second = ladder_choice.choose_step(
        ladder, 3, [TryOutcome(1, None, R.CAPACITY_NOT_FOUND), TryOutcome(2, 0, R.DEADLINE)]
    )
    assert (first.step_index, second.step_index) == (0, 1)
    assert fallback.spec_for_steps(base, ladder, [None, 0, 1]).spot is True
    assert ladder_choice.choose_step(ladder, 2, [TryOutcome(1, None, R.MEMBER_FAILED)]).exhausted


def test_exit_code_reasons_are_answered_by_retry_as_is_only_by_default() -> None:
    answering = {
        name for name, kind in ladder_format.STEP_TYPES.items() if R.MEMBER_EXIT_RETRYABLE in kind.default_reasons
    }
    assert answering == {"RetryAsIs"}
    ladder = (fallback.RetryAsIs(),)
    assert ladder_choice.choose_step(ladder, 2, [TryOutcome(1, None, R.MEMBER_EXIT_RETRYABLE)]).step_index == 0
    assert ladder_choice.choose_step(ladder, 2, [TryOutcome(1, None, R.MEMBER_EXIT_FAILS_FOR_GOOD)]).exhausted

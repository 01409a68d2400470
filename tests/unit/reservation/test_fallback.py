"""The fallback ladder: which step each try takes and why, what each step does to the spec."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import fallback, ladder_format
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.fallback import (
    OnDemand,
    OtherProvisioningClass,
    OtherQueue,
    OtherZone,
    RetryAsIs,
    ShrinkTo,
    TryOutcome,
)
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
        _history((R.MEMBER_FAILED, None), (R.MEMBER_FAILED, 2), (R.MEMBER_LOST, 3)),
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
    choice = fallback.choose_step(ladder, try_number, history)
    assert (choice.step_index, choice.exhausted) == (index, exhausted)
    assert choice.step is (None if index is None else ladder[index])
    assert choice.explanation.startswith(f"try {try_number}:")


def test_explanations_say_which_step_and_why():
    choice = fallback.choose_step(LADDER, 2, _history((R.CAPACITY_NOT_FOUND, None)))
    assert choice.explanation == "try 2: step 1 (other zone us-b) because try 1 ended with capacity_not_found"
    by_position = fallback.choose_step(LADDER, 3, [])
    assert "by position; the previous try's outcome is unknown" in by_position.explanation
    fixed = fallback.choose_step(LADDER, 2, _history((R.INVALID, None)))
    assert "which no fallback step can fix" in fixed.explanation


def test_steps_are_cumulative():
    base = gang_spec(size=8, min_size=2, spot=True)
    spec = fallback.spec_for_steps(base, LADDER, [None, 1, 0, 3])
    assert (spec.size, spec.original_size, spec.zone, spec.strict_zone, spec.spot) == (4, 8, "us-b", True, False)
    assert spec.name == base.name


SHRINK_CASES = [
    ("plain", ShrinkTo(4), 8, 4),
    ("rounds-down-to-multiple", ShrinkTo(7, divisible_by=2), 8, 6),
    ("never-grows", ShrinkTo(16), 8, 8),
]


@pytest.mark.parametrize(
    ("step", "current", "expected"), [c[1:] for c in SHRINK_CASES], ids=[c[0] for c in SHRINK_CASES]
)
def test_shrink_target(step, current, expected):
    assert step.target(current) == expected


def test_shrink_keeps_min_size_within_size_and_remembers_original():
    spec = ShrinkTo(4).apply(gang_spec(size=8, min_size=2))
    assert (spec.size, spec.min_size, spec.original_size) == (4, 2, 8)
    again = ShrinkTo(2).apply(spec)
    assert (again.size, again.original_size) == (2, 8)
    unset = ShrinkTo(4).apply(gang_spec(size=8, min_size=4))
    assert unset.min_size == 4


STEP_ERRORS = [
    ("shrink-below-min-size", ShrinkTo(2), {"size": 8, "min_size": 4}, "below min_size=4"),
    ("shrink-all-or-nothing", ShrinkTo(4), {"size": 8}, "below min_size=8"),
    ("shrink-to-zero-by-divisor", ShrinkTo(3, divisible_by=4), {"size": 8, "min_size": 1}, "gives 0 members"),
    ("shrink-size-invalid", ShrinkTo(0), {"size": 8, "min_size": 1}, "size must be"),
    ("shrink-divisor-invalid", ShrinkTo(4, divisible_by=0), {"size": 8, "min_size": 1}, "divisible_by must be"),
    ("queue-outside-kueue", OtherQueue("lq-2"), {}, "needs reservation='kueue'"),
    (
        "class-in-kueue",
        OtherProvisioningClass("queued-provisioning.gke.io"),
        {"mode": "kueue"},
        "ProvisioningRequest mode",
    ),
    ("class-unknown", OtherProvisioningClass("nope.example.com"), {}, "unknown class"),
    ("zone-invalid", OtherZone("not a zone"), {}, "zone label value"),
]


@pytest.mark.parametrize(
    ("step", "spec_overrides", "fragment"), [c[1:] for c in STEP_ERRORS], ids=[c[0] for c in STEP_ERRORS]
)
def test_step_errors(step, spec_overrides, fragment):
    with pytest.raises(GangSpecError) as caught:
        step.apply(gang_spec(**spec_overrides))
    assert fragment in str(caught.value)


STEP_EFFECTS = [
    ("retry-as-is", RetryAsIs(), {}, {}),
    ("zone-preferred", OtherZone("us-c", strict=False), {}, {"zone": "us-c", "strict_zone": False}),
    (
        "class-with-parameters",
        OtherProvisioningClass("queued-provisioning.gke.io", (("maxRunDurationSeconds", "3600"),)),
        {"provisioning_parameters": {"noRetry": "true"}},
        {
            "provisioning_class": "queued-provisioning.gke.io",
            "provisioning_parameters": {"maxRunDurationSeconds": "3600"},
        },
    ),
    ("queue", OtherQueue("lq-2"), {"mode": "kueue"}, {"queue": "lq-2"}),
    ("on-demand", OnDemand(), {"spot": True}, {"spot": False}),
]


@pytest.mark.parametrize(
    ("step", "spec_overrides", "changes"), [c[1:] for c in STEP_EFFECTS], ids=[c[0] for c in STEP_EFFECTS]
)
def test_step_effects(step, spec_overrides, changes):
    base = gang_spec(**spec_overrides)
    after = step.apply(base)
    assert {key: getattr(after, key) for key in changes} == changes
    assert step.describe()


def test_check_ladder_accepts_a_good_ladder():
    fallback.check_ladder(LADDER, gang_spec(size=8, min_size=2))


LADDER_ERRORS = [
    ("not-a-step", ("zone-b",), {}, "step 1 is 'zone-b'"),
    ("unknown-reason", (RetryAsIs(applies_to=frozenset({"bad_luck"})),), {}, "unknown reasons"),
    ("shrink-cumulative", (ShrinkTo(4), ShrinkTo(2)), {"size": 8, "min_size": 3}, "step 2 (shrink to 2 members)"),
    ("shrink-alone", (ShrinkTo(2),), {"size": 8, "min_size": 4}, "step 1"),
]


@pytest.mark.parametrize(
    ("ladder", "spec_overrides", "fragment"), [c[1:] for c in LADDER_ERRORS], ids=[c[0] for c in LADDER_ERRORS]
)
def test_check_ladder_errors(ladder, spec_overrides, fragment):
    with pytest.raises(GangSpecError) as caught:
        fallback.check_ladder(ladder, gang_spec(**spec_overrides))
    assert caught.value.field == "fallbacks" and fragment in caught.value.message


def test_required_modes():
    assert fallback.required_modes((OtherQueue("q"), ShrinkTo(2, divisible_by=2))) == (
        ("other queue q", "kueue"),
        ("shrink to 2 members (a multiple of 2)", ""),
    )


def test_summary_lists_every_try():
    history = [
        TryOutcome(1, None, R.CAPACITY_NOT_FOUND, "no capacity in us-a"),
        TryOutcome(2, 0, R.DEADLINE),
        TryOutcome(3, 9, R.MEMBER_FAILED),
    ]
    assert fallback.summarize(LADDER, history) == (
        "try 1 (as configured): capacity_not_found - no capacity in us-a; "
        "try 2 (step 1: other zone us-b): deadline; try 3 (as configured): member_failed"
    )
    assert fallback.summarize(LADDER, []) == "no try finished"


def test_try_outcome_round_trips():
    outcome = TryOutcome(2, 1, R.BOOKING_EXPIRED, "expired")
    assert outcome.to_dict() == {"try_number": 2, "step_index": 1, "reason": "booking_expired", "message": "expired"}
    assert TryOutcome.from_dict(outcome.to_dict()) == outcome
    assert TryOutcome.from_dict({"try_number": 1, "reason": "deadline"}) == TryOutcome(1, None, R.DEADLINE)


def test_a_ladder_round_trips_through_its_stored_form() -> None:


    ladder = (fallback.RetryAsIs(), fallback.ShrinkTo(2, divisible_by=2),
              fallback.OtherZone("b", applies_to=frozenset({Reason.DEADLINE})),
              fallback.OtherProvisioningClass("queued-provisioning.gke.io",
                                              parameters=(("maxRunDurationSeconds", "60"),)),
              fallback.OtherQueue("team-b"), fallback.OnDemand(), fallback.UseReservation("a100-res"),
              fallback.LeaveReservation(spot=True))
    plain = ladder_format.ladder_to_plain(ladder)
    assert plain[-2:] == [{"step": "UseReservation", "applies_to": [], "name": "a100-res"},
                          {"step": "LeaveReservation", "applies_to": [], "spot": True}]
    assert plain[2] == {"step": "OtherZone", "applies_to": ["deadline"], "zone": "b", "strict": True}
    assert ladder_format.ladder_from_plain(plain) == ladder
    assert ladder_format.ladder_from_plain([{"step": "ShrinkTo", "size": 3}]) == (fallback.ShrinkTo(3),)


def test_a_stored_step_of_unknown_type_is_named() -> None:


    with pytest.raises(GangSpecError, match="stored step 1 has unknown type 'Teleport'"):
        ladder_format.ladder_from_plain([{"step": "Teleport"}])


def test_only_killed_and_lost_worker_tries_are_no_ladder_input() -> None:
    assert not is_ladder_input(Reason.KILLED) and not is_ladder_input(Reason.WORKER_LOST)
    assert all(is_ladder_input(reason) for reason in Reason if reason not in (Reason.KILLED, Reason.WORKER_LOST))


def test_steps_that_change_nothing_are_found() -> None:
    base = gang_spec(size=4, min_size=2, zone="zone-a", strict_zone=True)
    ladder = (fallback.ShrinkTo(16), fallback.OtherZone("zone-a"), fallback.RetryAsIs(), fallback.ShrinkTo(2),
              fallback.OnDemand())
    assert fallback.no_op_steps(ladder, base) == ["step 1 (shrink to 16 members)", "step 2 (other zone zone-a)",
                                                  "step 5 (spot to on-demand)"]


def test_applies_to_written_as_a_string_is_refused() -> None:
    with pytest.raises(GangSpecError, match="applies_to must be a set of reasons, got 'deadline'"):
        fallback.check_ladder([fallback.RetryAsIs(applies_to="deadline")], gang_spec())  # type: ignore[arg-type]


SPOT_LADDER = (RetryAsIs(times=2), OnDemand())
SPOT_CHOICES = [
    ("first-preemption-stays-on-spot", 2, [(R.SPOT_PREEMPTED, None)], 0, False),
    ("second-preemption-stays-on-spot", 3, [(R.SPOT_PREEMPTED, None), (R.SPOT_PREEMPTED, 0)], 0, False),
    ("third-preemption-leaves-spot", 4, [(R.SPOT_PREEMPTED, None), (R.SPOT_PREEMPTED, 0), (R.SPOT_PREEMPTED, 0)],
     1, False),
    ("then-exhausted", 5, [(R.SPOT_PREEMPTED, None), (R.SPOT_PREEMPTED, 0), (R.SPOT_PREEMPTED, 0),
                           (R.SPOT_PREEMPTED, 1)], None, True),
    ("a-member-failure-also-uses-the-count", 3, [(R.MEMBER_FAILED, None), (R.SPOT_PREEMPTED, 0)], 0, False),
]


@pytest.mark.parametrize(("try_number", "history", "index", "exhausted"), [c[1:] for c in SPOT_CHOICES],
                         ids=[c[0] for c in SPOT_CHOICES])
def test_retry_as_is_is_used_up_to_its_count(try_number, history, index, exhausted) -> None:
    choice = fallback.choose_step(SPOT_LADDER, try_number, _history(*history))
    assert (choice.step_index, choice.exhausted) == (index, exhausted)


def test_a_counted_step_says_which_use_it_is() -> None:
    choice = fallback.choose_step(SPOT_LADDER, 3, _history((R.SPOT_PREEMPTED, None), (R.SPOT_PREEMPTED, 0)))
    assert choice.explanation == ("try 3: step 1 (retry as-is (up to 2 times), use 2 of 2) because try 2 ended with "
                                  "spot_preempted")


def test_spot_preemption_is_retryable_and_on_demand_answers_it_by_default() -> None:
    assert R.SPOT_PREEMPTED in OnDemand().reasons
    assert R.SPOT_PREEMPTED in RetryAsIs().reasons
    assert R.SPOT_PREEMPTED not in OtherQueue("q").reasons


def test_history_lost_walks_counted_steps_by_position() -> None:
    assert [fallback.choose_step(SPOT_LADDER, number, []).step_index for number in (2, 3, 4)] == [0, 0, 1]
    assert fallback.choose_step(SPOT_LADDER, 5, []).exhausted
    assert fallback.tries_needed(SPOT_LADDER) == 3


def test_the_count_is_stored_with_the_ladder_and_old_ladders_read_as_one() -> None:
    plain = ladder_format.ladder_to_plain(SPOT_LADDER)
    assert plain[0] == {"step": "RetryAsIs", "applies_to": [], "times": 2}
    assert ladder_format.ladder_from_plain(plain) == SPOT_LADDER
    assert ladder_format.ladder_from_plain([{"step": "RetryAsIs", "applies_to": []}]) == (RetryAsIs(times=1),)


@pytest.mark.parametrize("times", [0, -1, 1.5, "3", True])
def test_a_count_that_is_not_a_whole_number_is_refused(times) -> None:
    with pytest.raises(GangSpecError, match=r"times must be a whole number >= 1.*RetryAsIs\(times=3\)"):
        fallback.check_ladder([RetryAsIs(times=times)], gang_spec())
def test_use_reservation_requires_it_and_leaves_spot() -> None:
    spec = fallback.UseReservation("a100-res").apply(gang_spec(spot=True))
    assert (spec.reservation_name, spec.spot) == ("a100-res", False)


@pytest.mark.parametrize("reason", [R.CAPACITY_NOT_FOUND, R.CAPACITY_REVOKED, R.PREEMPTED])
def test_a_reservation_answers_capacity_taken_away_and_says_which(reason: Reason) -> None:
    ladder = (fallback.UseReservation("a100-res"),)
    fallback.check_ladder(ladder, gang_spec(spot=True))
    choice = fallback.choose_step(ladder, 2, [TryOutcome(1, None, reason)])
    assert choice.explanation == f"try 2: step 1 (use reservation a100-res) because try 1 ended with {reason.value}"
    assert fallback.summarize(ladder, [TryOutcome(1, None, reason), TryOutcome(2, 0, R.DEADLINE)]).endswith(
        "try 2 (step 1: use reservation a100-res): deadline")


def test_a_reservation_step_with_a_bad_name_is_refused_at_parse_time() -> None:
    with pytest.raises(GangSpecError, match=r"step 1 \(use reservation A100_res\).*not a reservation name"):
        fallback.check_ladder([fallback.UseReservation("A100_res")], gang_spec())


@pytest.mark.parametrize(("step", "spot"), [(fallback.LeaveReservation(), False),
                                             (fallback.LeaveReservation(spot=True), True)], ids=["on-demand", "spot"])
def test_leave_reservation_drops_the_requirement(step: fallback.LeaveReservation, spot: bool) -> None:
    spec = step.apply(gang_spec(reservation_name="a100-res"))
    assert (spec.reservation_name, spec.spot) == (None, spot)


def test_a_full_reservation_falls_back_to_on_demand_then_spot() -> None:
    ladder = (fallback.LeaveReservation(), fallback.LeaveReservation(spot=True))
    base = gang_spec(reservation_name="a100-res")
    fallback.check_ladder(ladder, base)
    first = fallback.choose_step(ladder, 2, [TryOutcome(1, None, R.CAPACITY_NOT_FOUND)])
    second = fallback.choose_step(ladder, 3, [TryOutcome(1, None, R.CAPACITY_NOT_FOUND), TryOutcome(2, 0, R.DEADLINE)])
    assert (first.step_index, second.step_index) == (0, 1)
    assert fallback.spec_for_steps(base, ladder, [None, 0, 1]).spot is True
    assert fallback.choose_step(ladder, 2, [TryOutcome(1, None, R.MEMBER_FAILED)]).exhausted


def test_exit_code_reasons_are_answered_by_retry_as_is_only_by_default() -> None:
    answering = {name for name, kind in ladder_format.STEP_TYPES.items()
                 if R.MEMBER_EXIT_RETRYABLE in kind.default_reasons}
    assert answering == {"RetryAsIs"}
    ladder = (fallback.RetryAsIs(),)
    assert fallback.choose_step(ladder, 2, [TryOutcome(1, None, R.MEMBER_EXIT_RETRYABLE)]).step_index == 0
    assert fallback.choose_step(ladder, 2, [TryOutcome(1, None, R.MEMBER_EXIT_FAILS_FOR_GOOD)]).exhausted

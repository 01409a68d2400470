"""What each fallback step does to the spec, and which ladders ``check_ladder`` refuses."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import fallback
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.fallback import (
    OnDemand,
    OtherProvisioningClass,
    OtherQueue,
    OtherZone,
    RetryAsIs,
    ShrinkTo,
)
from airflow_provider_gang.reservation.phases import Reason
from tests.builders import gang_spec

LADDER = (OtherZone("us-b"), ShrinkTo(4, divisible_by=2), RetryAsIs(), OnDemand())
R = Reason


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


def test_steps_that_change_nothing_are_found() -> None:
    base = gang_spec(size=4, min_size=2, zone="zone-a", strict_zone=True)
    ladder = (
        fallback.ShrinkTo(16),
        fallback.OtherZone("zone-a"),
        fallback.RetryAsIs(),
        fallback.ShrinkTo(2),
        fallback.OnDemand(),
    )
    assert fallback.no_op_steps(ladder, base) == [
        "step 1 (shrink to 16 members)",
        "step 2 (other zone zone-a)",
        "step 5 (spot to on-demand)",
    ]


def test_applies_to_written_as_a_string_is_refused() -> None:
    with pytest.raises(GangSpecError, match="applies_to must be a set of reasons, got 'deadline'"):
        fallback.check_ladder([fallback.RetryAsIs(applies_to="deadline")], gang_spec())  # type: ignore[arg-type]


@pytest.mark.parametrize("times", [0, -1, 1.5, "3", True])
def test_a_count_that_is_not_a_whole_number_is_refused(times) -> None:
    with pytest.raises(GangSpecError, match=r"times must be a whole number >= 1.*RetryAsIs\(times=3\)"):
        fallback.check_ladder([RetryAsIs(times=times)], gang_spec())


def test_use_reservation_requires_it_and_leaves_spot() -> None:
    spec = fallback.UseReservation("a100-res").apply(gang_spec(spot=True))
    assert (spec.reservation_name, spec.spot) == ("a100-res", False)


def test_a_reservation_step_with_a_bad_name_is_refused_at_parse_time() -> None:
    with pytest.raises(GangSpecError, match=r"step 1 \(use reservation A100_res\).*not a reservation name"):
        fallback.check_ladder([fallback.UseReservation("A100_res")], gang_spec())


@pytest.mark.parametrize(
    ("step", "spot"),
    [(fallback.LeaveReservation(), False), (fallback.LeaveReservation(spot=True), True)],
    ids=["on-demand", "spot"],
)
def test_leave_reservation_drops_the_requirement(step: fallback.LeaveReservation, spot: bool) -> None:
    spec = step.apply(gang_spec(reservation_name="a100-res"))
    assert (spec.reservation_name, spec.spot) == (None, spot)

"""The stored form of a fallback ladder (``reservation.ladder_format``): round trips, counts, unknown steps."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import fallback, ladder_format
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.fallback import OnDemand, RetryAsIs
from airflow_provider_gang.reservation.phases import Reason

SPOT_LADDER = (RetryAsIs(times=2), OnDemand())


def test_a_ladder_round_trips_through_its_stored_form() -> None:
    ladder = (
        fallback.RetryAsIs(),
        fallback.ShrinkTo(2, divisible_by=2),
        fallback.OtherZone("b", applies_to=frozenset({Reason.DEADLINE})),
        fallback.OtherProvisioningClass("queued-provisioning.gke.io", parameters=(("maxRunDurationSeconds", "60"),)),
        fallback.OtherQueue("team-b"),
        fallback.OnDemand(),
        fallback.UseReservation("a100-res"),
        fallback.LeaveReservation(spot=True),
        fallback.LoosenTopology("cloud.google.com/gce-topology-block", preferred=True),
    )
    plain = ladder_format.ladder_to_plain(ladder)
    assert plain[-3:] == [
        {"step": "UseReservation", "applies_to": [], "name": "a100-res"},
        {"step": "LeaveReservation", "applies_to": [], "spot": True},
        {"step": "LoosenTopology", "applies_to": [], "to": "cloud.google.com/gce-topology-block", "preferred": True},
    ]
    assert plain[2] == {"step": "OtherZone", "applies_to": ["deadline"], "zone": "b", "strict": True}
    assert ladder_format.ladder_from_plain(plain) == ladder
    assert ladder_format.ladder_from_plain([{"step": "ShrinkTo", "size": 3}]) == (fallback.ShrinkTo(3),)


def test_a_stored_step_of_unknown_type_is_named() -> None:
    with pytest.raises(GangSpecError, match="stored step 1 has unknown type 'Teleport'"):
        ladder_format.ladder_from_plain([{"step": "Teleport"}])


def test_the_count_is_stored_with_the_ladder_and_old_ladders_read_as_one() -> None:
    plain = ladder_format.ladder_to_plain(SPOT_LADDER)
    assert plain[0] == {"step": "RetryAsIs", "applies_to": [], "times": 2}
    assert ladder_format.ladder_from_plain(plain) == SPOT_LADDER
    assert ladder_format.ladder_from_plain([{"step": "RetryAsIs", "applies_to": []}]) == (RetryAsIs(times=1),)

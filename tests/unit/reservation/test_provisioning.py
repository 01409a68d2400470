"""classify_provisioning_request: one row per state, and the documented precedence."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import provisioning
from airflow_provider_gang.reservation.provisioning import ProvisioningState
from tests.builders import provreq

CASES = [
    ("gone", None, ProvisioningState.GONE),
    ("no-conditions", provreq().obj(), ProvisioningState.NOT_HANDLED),
    ("accepted", provreq().accepted().obj(), ProvisioningState.ACCEPTED),
    ("accepted-not-provisioned", provreq().accepted().not_provisioned().obj(), ProvisioningState.ACCEPTED),
    (
        "gke-not-provisioned-before-accepted",
        provreq().not_provisioned("NotProvisioned").obj(),
        ProvisioningState.ACCEPTED,
    ),
    ("accepted-false", provreq().condition("Accepted", "False", "NotAccepted").obj(), ProvisioningState.NOT_HANDLED),
    ("provisioned", provreq().accepted().provisioned().obj(), ProvisioningState.PROVISIONED),
    ("booking-expired", provreq().accepted().provisioned().booking_expired().obj(), ProvisioningState.BOOKING_EXPIRED),
    (
        "booking-consumed",
        provreq().accepted().provisioned().booking_expired("CapacityBookingConsumed").obj(),
        ProvisioningState.BOOKING_CONSUMED,
    ),
    (
        "booking-expired-false",
        provreq().provisioned().condition("BookingExpired", "False").obj(),
        ProvisioningState.PROVISIONED,
    ),
    (
        "revoked-outranks-booking-expired",
        provreq().provisioned().booking_expired().revoked().obj(),
        ProvisioningState.CAPACITY_REVOKED,
    ),
    ("failed", provreq().accepted().failed().obj(), ProvisioningState.FAILED),
    (
        "failed-outranks-everything",
        provreq().provisioned().booking_expired().revoked().failed().obj(),
        ProvisioningState.FAILED,
    ),
]


@pytest.mark.parametrize(("request_object", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_classify_provisioning_request(request_object, expected):
    assert provisioning.classify_provisioning_request(request_object) is expected


DESCRIBE_CASES = [
    ("gone", None, ""),
    ("not-handled", provreq().obj(), ""),
    (
        "accepted-uses-provisioned-message",
        provreq().accepted().not_provisioned().obj(),
        "CapacityIsNotFound: Capacity is not found, CA will try to find it later.",
    ),
    (
        "accepted-only-falls-back-to-accepted",
        provreq().accepted().obj(),
        "Accepted: ProvisioningRequest is accepted by ClusterAutoscaler",
    ),
    (
        "failed",
        provreq().failed("OutOfResources", "max cluster limit reached").obj(),
        "OutOfResources: max cluster limit reached",
    ),
    ("revoked", provreq().provisioned().revoked().obj(), "CapacityRevoked: nodes reclaimed"),
]


@pytest.mark.parametrize(
    ("request_object", "expected"), [c[1:] for c in DESCRIBE_CASES], ids=[c[0] for c in DESCRIBE_CASES]
)
def test_describe_quotes_the_deciding_condition(request_object, expected):
    assert provisioning.describe(request_object) == expected


def test_failure_reason():
    assert provisioning.failure_reason(provreq().failed("CapacityIsNotFound").obj()) == "CapacityIsNotFound"
    assert provisioning.failure_reason(provreq().obj()) == ""

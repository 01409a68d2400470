"""Where a ProvisioningRequest stands: :func:`classify_provisioning_request`.

Precedence, first match wins, as Kueue reads the conditions
(``pkg/controller/admissionchecks/provisioning/controller.go``, ``syncCheckStates``)::

    Failed=True           -> FAILED            terminal, the request will not be retried by CA
    CapacityRevoked=True  -> CAPACITY_REVOKED  the provisioned nodes are gone (GKE)
    BookingExpired=True   -> BOOKING_CONSUMED  if reason CapacityBookingConsumed (our pods are bound)
                          -> BOOKING_EXPIRED   otherwise (10 minutes passed before binding)
    Provisioned=True      -> PROVISIONED       capacity booked for us: launch now
    Accepted=True         -> ACCEPTED          CA works on it; Provisioned=False means "retrying"
    otherwise             -> NOT_HANDLED       no controller has picked it up yet

``Provisioned=False`` without ``Accepted`` (GKE shows ``NotProvisioned`` first) also reads as ACCEPTED:
the request is known and being worked on. ``None`` (no object) is GONE.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from airflow_provider_gang.reservation import conditions
from airflow_provider_gang.reservation.conditions import Object


class ProvisioningState(str, Enum):
    GONE = "gone"
    NOT_HANDLED = "not_handled"
    ACCEPTED = "accepted"
    PROVISIONED = "provisioned"
    BOOKING_CONSUMED = "booking_consumed"
    BOOKING_EXPIRED = "booking_expired"
    CAPACITY_REVOKED = "capacity_revoked"
    FAILED = "failed"


def _is_known(request: Object) -> bool:
    """``Accepted=True``, or any ``Provisioned`` condition (GKE's ``NotProvisioned`` comes first)."""
    return conditions.is_accepted(request) or conditions.find_condition(request, conditions.PROVISIONED) is not None


_PRECEDENCE: tuple[tuple[Callable[[Object], bool], ProvisioningState], ...] = (
    (conditions.is_failed, ProvisioningState.FAILED),
    (conditions.is_capacity_revoked, ProvisioningState.CAPACITY_REVOKED),
    (conditions.is_booking_consumed, ProvisioningState.BOOKING_CONSUMED),
    (conditions.is_booking_expired, ProvisioningState.BOOKING_EXPIRED),
    (conditions.is_provisioned, ProvisioningState.PROVISIONED),
    (_is_known, ProvisioningState.ACCEPTED),
)


def classify_provisioning_request(request: Object | None) -> ProvisioningState:
    """The state of ``request`` by the precedence in the module docstring. Pure."""
    if request is None:
        return ProvisioningState.GONE
    return conditions.first_match(request, _PRECEDENCE, ProvisioningState.NOT_HANDLED)


def failure_reason(request: Object | None) -> str:
    """The upstream reason of ``Failed`` (``CapacityIsNotFound``, ``Expired``, ...), or ``""``."""
    condition = conditions.find_condition(request, conditions.FAILED)
    return str((condition or {}).get("reason") or "")


def describe(request: Object | None) -> str:
    """The most telling condition text of ``request`` for a human: the one that decided its state."""
    state = classify_provisioning_request(request)
    condition_type = {
        ProvisioningState.FAILED: conditions.FAILED,
        ProvisioningState.CAPACITY_REVOKED: conditions.CAPACITY_REVOKED,
        ProvisioningState.BOOKING_CONSUMED: conditions.BOOKING_EXPIRED,
        ProvisioningState.BOOKING_EXPIRED: conditions.BOOKING_EXPIRED,
        ProvisioningState.PROVISIONED: conditions.PROVISIONED,
        ProvisioningState.ACCEPTED: conditions.PROVISIONED,
    }.get(state)
    if condition_type is None:
        return ""
    return conditions.condition_message(request, condition_type) or conditions.condition_message(
        request, conditions.ACCEPTED
    )

"""``ReservationTrigger``: waits, without a worker slot, until the gang's reservation is decided.

One trigger per gang, whatever the mode or size. It lists then watches the reservation objects of its
mode - the ProvisioningRequest (``provisioning_request``, ``gates``), the Kueue Workload (``kueue``), the
gated member pods (``gates``) - feeds every change to ``reservation.decision.decide`` and yields exactly
one event: when the reservation is granted, when it fails for good, or when its own ``deadline`` passes
(upstream may leave a request in ``Accepted`` forever). See :mod:`.events` for the payload and
:mod:`.base` for the common arguments, duplicate-safety, ``on_kill`` and ``cleanup``.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation.decision import Policy
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.triggers.base import GangTrigger


class ReservationTrigger(GangTrigger):
    """Wait for the reservation of one gang.

    Arguments beyond :class:`GangTrigger`'s (all plain values, part of the stored format); there
    ``size`` is the members requested, ``started_at`` when the reservation was requested,
    ``pod_selector`` the gated members (``gates``):

    - ``scheduling_gate``: the gang's gate name (``gates``).
    - ``deadline_reason``: ``Reason`` value reported when ``deadline`` ends the wait (``deadline``, or
      ``start_window_missed`` when the operator's ``start_by`` is the earlier limit).
    """

    stage = Stage.RESERVATION

    def __init__(
        self, *, scheduling_gate: str | None = None, deadline_reason: str = Reason.DEADLINE.value, **common: Any
    ) -> None:
        super().__init__(**common)
        self.scheduling_gate = scheduling_gate
        self.deadline_reason = Reason(deadline_reason)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return self.serialize_with(scheduling_gate=self.scheduling_gate, deadline_reason=self.deadline_reason.value)

    def policy(self) -> Policy:
        return Policy(deadline=self.deadline, deadline_reason=self.deadline_reason)

    def describe_wait(self) -> str:
        return f"waiting for the {self.mode.value} reservation of {self.size} members"

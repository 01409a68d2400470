"""``ReservationTrigger``: waits, without a worker slot, until the gang's reservation is decided.

One trigger per gang, whatever the mode or size. It lists then watches the reservation objects of its
mode - the ProvisioningRequest (``provisioning_request``, ``gates``), the Kueue Workload (``kueue``), the
PodGroup and its member pods (``workload``), the gated member pods (``gates``) - feeds every change to
``reservation.decision.decide`` and yields exactly one event: when the reservation is granted, when it
fails for good, or when its own ``deadline`` passes (upstream may leave a request in ``Accepted``
forever). The arguments are ``reservation.records.triggers.TriggerArguments`` (``size``: the members
requested, ``started_at``: when the reservation was requested, ``pod_selector``: the members created up
front, gated or linked to the PodGroup, ``scheduling_gate`` and ``deadline_reason``); the event is
``reservation.records.events.GangEvent``. See :mod:`.base` for duplicate-safety, ``on_kill`` and
``cleanup``.
"""

from __future__ import annotations

from airflow_provider_gang.reservation.decision import Policy
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.triggers.base import GangTrigger


class ReservationTrigger(GangTrigger):
    """Wait for the reservation of one gang."""

    stage = Stage.RESERVATION

    def policy(self) -> Policy:
        return Policy(deadline=self.deadline, deadline_reason=self.arguments.deadline_reason)

    def describe_wait(self) -> str:
        return f"waiting for the {self.mode.value} reservation of {self.size} members"

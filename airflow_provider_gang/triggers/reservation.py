"""``ReservationTrigger``: waits, without a worker slot, until the gang's reservation is decided.

One trigger per gang, whatever the mode or size. It lists then watches the reservation objects of its
mode - the ProvisioningRequest (``provisioning_request``, ``gates``), the Kueue Workload (``kueue``), the
gated member pods (``gates``) - feeds every change to ``reservation.decision.decide`` and yields exactly
one event: when the reservation is granted, when it fails for good, or when its own ``deadline`` passes
(upstream may leave a request in ``Accepted`` forever). See :mod:`.events` for the payload and
:mod:`.base` for duplicate-safety, ``on_kill`` and ``cleanup``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from airflow.triggers.base import TriggerEvent

from airflow_provider_gang.reservation.decision import Policy
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.base import GangTrigger
from airflow_provider_gang.triggers.observation import GangObjects


class ReservationTrigger(GangTrigger):
    """Wait for the reservation of one gang.

    Arguments beyond :class:`GangTrigger`'s (all plain values, part of the stored format):

    - ``mode``: ``ReservationMode`` value.
    - ``size``: members requested.
    - ``started_at``: UNIX time the reservation was requested (timings, messages).
    - ``provisioning_request``: name of the gang's ProvisioningRequest (modes using one).
    - ``workload_selector``: label selector of the gang's Kueue Workload (``kueue``).
    - ``pod_selector``: label selector of the gated members (``gates``).
    - ``scheduling_gate``: the gang's gate name (``gates``).
    - ``deadline_reason``: ``Reason`` value reported when ``deadline`` ends the wait (``deadline``, or
      ``start_window_missed`` when the operator's ``start_by`` is the earlier limit).
    """

    def __init__(
        self,
        *,
        connection: Mapping[str, Any],
        gang_name: str,
        namespace: str,
        deadline: float,
        mode: str,
        size: int,
        started_at: float,
        provisioning_request: str | None = None,
        workload_selector: str | None = None,
        pod_selector: str | None = None,
        scheduling_gate: str | None = None,
        deadline_reason: str = Reason.DEADLINE.value,
        delete_on_kill: Sequence[Mapping[str, Any]] = (),
        client_options: Mapping[str, Any] | None = None,
        watch_timeout_seconds: int = 300,
    ) -> None:
        super().__init__(
            connection=connection,
            gang_name=gang_name,
            namespace=namespace,
            deadline=deadline,
            delete_on_kill=delete_on_kill,
            client_options=client_options,
            watch_timeout_seconds=watch_timeout_seconds,
        )
        self.mode = ReservationMode(mode)
        self.size = int(size)
        self.started_at = float(started_at)
        self.objects = GangObjects(
            provisioning_request=provisioning_request,
            workload_selector=workload_selector,
            pod_selector=pod_selector,
        )
        self.scheduling_gate = scheduling_gate
        self.deadline_reason = Reason(deadline_reason)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                **self.common_kwargs(),
                "mode": self.mode.value,
                "size": self.size,
                "started_at": self.started_at,
                "provisioning_request": self.objects.provisioning_request,
                "workload_selector": self.objects.workload_selector,
                "pod_selector": self.objects.pod_selector,
                "scheduling_gate": self.scheduling_gate,
                "deadline_reason": self.deadline_reason.value,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self.log.info(
            "Gang %s: waiting for the %s reservation of %d members", self.gang_name, self.mode.value, self.size
        )
        payload = await self.decide_until_terminal(
            self.objects,
            mode=self.mode,
            stage=Stage.RESERVATION,
            size=self.size,
            started_at=self.started_at,
            policy=Policy(deadline=self.deadline, deadline_reason=self.deadline_reason),
            scheduling_gate=self.scheduling_gate,
        )
        self.fired = True
        self.log.info("Gang %s: %s (%s) %s", self.gang_name, payload["phase"], payload["reason"], payload["message"])
        yield TriggerEvent(payload)  # type: ignore[no-untyped-call]

"""``GangRunTrigger``: watches every member of a launched gang as one unit.

One label-selector LIST + WATCH over the members' pods (plus the reservation object, if given, so a
revoked ProvisioningRequest or a preempted Workload ends the run with that reason), every change fed to
``reservation.decision.decide``. It yields one event when every member succeeded, when any member
failed or was lost (the payload's ``members`` says which rank and why), when members did not all start
by ``startup_deadline``, or at ``deadline``. See :mod:`.events` and :mod:`.base`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from airflow.triggers.base import TriggerEvent

from airflow_provider_gang.reservation.decision import Policy
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.base import GangTrigger
from airflow_provider_gang.triggers.observation import GangObjects


class GangRunTrigger(GangTrigger):
    """Watch the launched members of one gang.

    Arguments beyond :class:`GangTrigger`'s (plain values, part of the stored format):

    - ``mode``: ``ReservationMode`` value the gang was reserved with.
    - ``size``: members launched (after partial admission, the admitted count).
    - ``started_at``: UNIX time the members were launched.
    - ``pod_selector``: label selector matching exactly the gang's member pods.
    - ``provisioning_request`` / ``workload_selector``: the reservation object, to notice its loss.
    - ``startup_deadline``: UNIX time by which every member must be running (``None``: no limit).
    - ``pods_from_job``: members are created by a Job controller, so a rank without a pod is still to
      come, not lost. ``None`` (default) means "``kueue`` mode": its members come from the Indexed Job
      Kueue unsuspends.
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
        pod_selector: str,
        provisioning_request: str | None = None,
        workload_selector: str | None = None,
        startup_deadline: float | None = None,
        pods_from_job: bool | None = None,
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
            provisioning_request=provisioning_request, workload_selector=workload_selector, pod_selector=pod_selector
        )
        self.startup_deadline = None if startup_deadline is None else float(startup_deadline)
        self.pods_from_job = self.mode is ReservationMode.KUEUE if pods_from_job is None else bool(pods_from_job)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                **self.common_kwargs(),
                "mode": self.mode.value,
                "size": self.size,
                "started_at": self.started_at,
                "pod_selector": self.objects.pod_selector,
                "provisioning_request": self.objects.provisioning_request,
                "workload_selector": self.objects.workload_selector,
                "startup_deadline": self.startup_deadline,
                "pods_from_job": self.pods_from_job,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        self.log.info("Gang %s: watching %d members (%s)", self.gang_name, self.size, self.objects.pod_selector)
        payload = await self.decide_until_terminal(
            self.objects,
            mode=self.mode,
            stage=Stage.RUN,
            size=self.size,
            started_at=self.started_at,
            policy=Policy(deadline=self.deadline, startup_deadline=self.startup_deadline),
            pods_from_job=self.pods_from_job,
        )
        self.fired = True
        self.log.info("Gang %s: %s (%s) %s", self.gang_name, payload["phase"], payload["reason"], payload["message"])
        yield TriggerEvent(payload)  # type: ignore[no-untyped-call]

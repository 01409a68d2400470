"""``GangRunTrigger``: watches every member of a launched gang as one unit.

One label-selector LIST + WATCH over the members' pods (plus the reservation object, if given, so a
revoked ProvisioningRequest or a preempted Workload ends the run with that reason), every change fed to
``reservation.decision.decide``. It yields one event when every member succeeded, when any member
failed or was lost (the payload's ``members`` says which rank and why), when members did not all start
by ``startup_deadline``, or at ``deadline``. See :mod:`.events` and :mod:`.base`.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation.decision import Policy
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers.base import GangTrigger


class GangRunTrigger(GangTrigger):
    """Watch the launched members of one gang.

    Arguments beyond :class:`GangTrigger`'s (plain values, part of the stored format); there ``size``
    is the members launched (after partial admission, the admitted count), ``started_at`` when they
    were launched, ``pod_selector`` (required) matches exactly the gang's member pods, and
    ``provisioning_request`` / ``workload_selector`` name the reservation object, to notice its loss:

    - ``startup_deadline``: UNIX time by which every member must be running (``None``: no limit).
    - ``pods_from_job``: members are created by a Job controller, so a rank without a pod is still to
      come, not lost. ``None`` (default) means "``kueue`` mode": its members come from the Indexed Job
      Kueue unsuspends.
    - ``read_checkpoints``: the gang has a ``checkpoint``, so container 0's termination message is a
      checkpoint report (``reservation.checkpoint``); the event's ``checkpoint`` carries the latest.
      ``False`` for triggers serialized before it existed.
    """

    stage = Stage.RUN

    def __init__(
        self,
        *,
        pod_selector: str,
        startup_deadline: float | None = None,
        pods_from_job: bool | None = None,
        read_checkpoints: bool = False,
        **common: Any,
    ) -> None:
        super().__init__(pod_selector=pod_selector, **common)
        self.read_checkpoints = bool(read_checkpoints)
        self.startup_deadline = None if startup_deadline is None else float(startup_deadline)
        self.pods_from_job = self.mode is ReservationMode.KUEUE if pods_from_job is None else bool(pods_from_job)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return self.serialize_with(
            startup_deadline=self.startup_deadline,
            pods_from_job=self.pods_from_job,
            read_checkpoints=self.read_checkpoints,
        )

    def policy(self) -> Policy:
        return Policy(deadline=self.deadline, startup_deadline=self.startup_deadline)

    def describe_wait(self) -> str:
        return f"watching {self.size} members ({self.objects.pod_selector})"

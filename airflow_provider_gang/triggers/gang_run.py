"""``GangRunTrigger``: watches every member of a launched gang as one unit.

One label-selector LIST + WATCH over the members' pods (plus the reservation object, if given, so a
revoked ProvisioningRequest or a preempted Workload ends the run with that reason), every change fed to
``reservation.decision.decide``. It yields one event when every member succeeded, when any member
failed or was lost (the event's ``members`` says which rank and why), when members did not all start
by ``startup_deadline``, or at ``deadline``. The arguments are
``reservation.records.triggers.TriggerArguments`` (``size``: the members launched, after partial
admission the admitted count; ``started_at``: when they were launched; ``pod_selector``, required:
exactly the gang's member pods; ``provisioning_request`` / ``workload_selector``: the reservation
object, to notice its loss; ``startup_deadline``, ``pods_from_job``, ``read_checkpoints``; for a gang
a Kueue MultiKueue manager dispatched: ``members_kubernetes_conn_id``, the worker the pods and the
Workload are watched on, or ``job_name`` instead of ``pod_selector``: the manager's Job, whose
mirrored status is all there is to read of a worker without a mapped connection). See :mod:`.base`.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation.decision import Policy
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.triggers.base import GangTrigger


class GangRunTrigger(GangTrigger):
    """Watch the launched members of one gang."""

    stage = Stage.RUN

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not self.objects.pod_selector and not self.objects.job:
            raise ValueError("GangRunTrigger needs pod_selector (the gang's member pods) or job_name")

    def policy(self) -> Policy:
        return Policy(deadline=self.deadline, startup_deadline=self.arguments.startup_deadline)

    def describe_wait(self) -> str:
        if not self.objects.pod_selector:
            return f"watching {self.size} members through the status of Job {self.objects.job}"
        where = self.arguments.members_kubernetes_conn_id
        return f"watching {self.size} members ({self.objects.pod_selector})" + (f" on {where}" if where else "")

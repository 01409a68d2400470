"""What a trigger feeds to :func:`reservation.decision.decide`: :class:`Observed`, and :class:`Stage`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from airflow_provider_gang.reservation.spec import ReservationMode


class Stage(str, Enum):
    """Which wait the observation belongs to."""

    RESERVATION = "reservation"
    """Waiting for the reservation to be granted (``ReservationTrigger``)."""
    RUN = "run"
    """Watching the launched members (``GangRunTrigger``)."""


@dataclass(frozen=True)
class Observed:
    """A snapshot of the gang's objects as a trigger last saw them (plain dicts, wire format).

    - ``mode``: how the gang reserves (decides which objects matter).
    - ``stage``: :class:`Stage`.
    - ``size``: members expected (in the run stage: the size actually launched, e.g. after partial
      admission).
    - ``started_at``: epoch seconds when this wait began (for messages and timings).
    - ``provisioning_request``: the gang's ProvisioningRequest, ``None`` if absent (modes
      ``provisioning_request`` and ``gates``).
    - ``workload``: the Kueue Workload, ``None`` if absent (mode ``kueue``).
    - ``pod_group``: the gang's PodGroup, ``None`` if absent (mode ``workload``).
    - ``pods``: the gang's pods (gated members in ``gates`` mode, the PodGroup's members in
      ``workload`` mode; members in the run stage).
    - ``scheduling_gate``: the gang's gate name; required in ``gates`` mode (``naming.GangNames``).
    - ``pods_from_job``: members are created by a Job controller (Kueue Job launch), so a rank
      without a pod is still to come rather than lost.
    - ``spot_preempted_ranks``: ranks an earlier observation of this wait saw spot-preempted
      (``members.is_spot_preempted``): the node goes away with the pod, so the last view may no longer
      show why the member is missing.
    - ``job``: the gang's Job (run stage, ``job_status_only``), ``None`` if absent.
    - ``job_status_only``: the member pods cannot be read (a MultiKueue worker without a mapped
      connection, ``reservation.multikueue``): the run is judged by ``job``'s status alone
      (``reservation.job_status``).
    - ``nodes_shutting_down``: spot nodes of members that the trigger read with GKE's termination
      taint, or found deleted, when it checked before deciding a member failure (``members.
      spot_preemption``): the preempted pod's own status says so only once its containers stopped.
    """

    mode: ReservationMode
    stage: Stage
    size: int
    started_at: float
    provisioning_request: Mapping[str, Any] | None = None
    workload: Mapping[str, Any] | None = None
    pod_group: Mapping[str, Any] | None = None
    pods: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    scheduling_gate: str | None = None
    pods_from_job: bool = False
    spot_preempted_ranks: frozenset[int] = frozenset()
    nodes_shutting_down: frozenset[str] = frozenset()
    job: Mapping[str, Any] | None = None
    job_status_only: bool = False

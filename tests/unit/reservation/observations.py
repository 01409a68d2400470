"""What ``decide()`` is given in the decision tests: ``Observed`` snapshots of a gang at either stage,
built from ``tests.builders`` objects (members ``gang-t1-abc-<rank>``, started at ``T0``)."""

from __future__ import annotations

from airflow_provider_gang.reservation.decision import Observed, Policy, Stage
from airflow_provider_gang.reservation.spec import ReservationMode
from tests.builders import T0, member

GATE = "airflow-gang.io/gang-t1-abc"
NO_LIMIT = Policy()


def reservation_stage(mode, *, request=None, workload=None, pods=(), size=3):
    """The gang waiting for its reservation in ``mode`` (a ``ReservationMode`` value)."""
    return Observed(
        mode=ReservationMode(mode),
        stage=Stage.RESERVATION,
        size=size,
        started_at=T0,
        provisioning_request=request,
        workload=workload,
        pods=[p.obj() for p in pods],
        scheduling_gate=GATE if mode == "gates" else None,
    )


def gated_pods(size=3):
    """``size`` members held by the gang's scheduling gate."""
    return [member(rank).gated(GATE) for rank in range(size)]


def run_stage(mode="provisioning_request", *pods, request=None, workload=None, size=3, from_job=False):
    """The gang's launched members, ``pods`` builders, in ``mode``."""
    return Observed(
        mode=ReservationMode(mode),
        stage=Stage.RUN,
        size=size,
        started_at=T0,
        provisioning_request=request,
        workload=workload,
        pods=[p.obj() for p in pods],
        pods_from_job=from_job,
    )

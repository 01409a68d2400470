"""``TrySettings``: what a try needs of the operator's arguments, as rendered values.

Built by ``GangTrainingOperator.try_settings`` at every entry point of a try, after Airflow rendered
the templated fields; frozen, and holding values only, so a try never reads the operator again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_gang.airflow_compat import AirflowNotFoundException
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.operators import configuration
from airflow_provider_gang.reservation import cloud, fallback, validation
from airflow_provider_gang.reservation.cloud import CloudProfile
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError

DEFAULT_PROVISIONING_CLASS = validation.BEST_EFFORT_ATOMIC
UNLIMITED_RUN = timedelta(days=365)
"""Stand-in deadline for ``run_timeout=None``: the run trigger needs an absolute deadline."""


@dataclass(frozen=True)
class TrySettings:
    """The operator's arguments for one entry point of a try.

    ``configured`` is the gang as configured, before any fallback step, under a stand-in name (the
    plan names it per try); ``None`` when ``argument_error`` says which rendered argument is invalid -
    the try then ends as ``invalid`` before anything is created. ``mode`` and ``size`` describe a try
    refused before it had a spec; ``ladder`` is the fallback ladder the sequence walks when it has
    none stored yet. ``auto_reservation``: ``reservation="auto"``, ``configured`` is in ``gates``
    mode and each new try chooses its mode on its cluster (``reservation.tries.auto_mode``).
    The fields named like an operator argument are that argument as it is
    (``reservation.tries.argument_record.try_settings``; ``mode`` is ``reservation``);
    ``client_options`` lays the argument over the deployment's ``[gang] client_*`` options, and
    ``heartbeat_seconds`` / ``watch_timeout_seconds`` are ``[gang] heartbeat_interval`` /
    ``watch_timeout`` (``operators.configuration``). ``rank_zero_returns``: the task's return value
    is rank 0's (``@task.gang``), read from its log when the gang succeeded (``member.function_call``).
    """

    kubernetes_conn_id: str
    namespace: str
    mode: str
    size: int
    ladder: tuple[fallback.FallbackStep, ...]
    configured: GangSpec | None
    auto_reservation: bool
    argument_error: GangArgumentError | None
    reservation_timeout: timedelta
    startup_timeout: timedelta
    run_timeout: timedelta | None
    start_by: timedelta | None
    unreachable_timeout: timedelta
    on_finish: str
    log_ranks: Sequence[int] | str
    client_options: ClientOptions
    heartbeat_seconds: float
    watch_timeout_seconds: int
    log: Any
    """The operator's logger (Airflow's structlog logger, or a stdlib one)."""
    rank_zero_returns: bool = False
    multikueue_connections: Mapping[str, str] = field(default_factory=dict)
    """The Airflow connection of each Kueue MultiKueue worker cluster, by MultiKueueCluster name: the
    task's ``multikueue_connections``, else ``[gang] multikueue_connections`` (``operators.configuration``)."""


CLOUD_EXTRA = "cloud"
"""The ``kubernetes`` connection extra that names the cluster's cloud profile (``reservation.cloud``)."""


def cloud_profile(argument: str | CloudProfile | None, kubernetes_conn_id: str) -> CloudProfile:
    """The gang's cloud profile: the operator's ``cloud`` argument when given, else the connection's
    extra ``cloud`` (a profile name or a ``CloudProfile.to_dict()`` mapping), else the deployment's
    ``[gang] default_cloud`` (GKE's unless configured).

    Read on the worker when a try starts, before anything is created. A connection that does not
    exist yields the default profile here; the try then fails on the connection itself. Raises
    :class:`GangArgumentError` naming ``cloud`` and the connection (or the option) for a value no
    profile matches.
    """
    if argument is not None:
        try:
            return cloud.profile_of(argument)
        except GangSpecError as error:
            raise GangArgumentError("cloud", error.message) from error
    try:
        extra = BaseHook.get_connection(kubernetes_conn_id).extra_dejson.get(CLOUD_EXTRA)
    except AirflowNotFoundException:
        extra = None
    if extra is None:
        return _default_cloud()
    try:
        return cloud.profile_of(extra)
    except GangSpecError as error:
        raise GangArgumentError(
            "cloud", f"connection {kubernetes_conn_id!r} extra {CLOUD_EXTRA!r}: {error.message}"
        ) from error


def _default_cloud() -> CloudProfile:
    named = configuration.default_cloud()
    try:
        return cloud.profile_of(named)
    except GangSpecError as error:
        raise GangArgumentError("cloud", f"[gang] default_cloud: {error.message}") from error

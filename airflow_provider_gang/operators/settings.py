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

from airflow_provider_gang.airflow_compat import AirflowNotFoundException, conf
from airflow_provider_gang.get_provider_info import CONFIG_SECTION, MULTIKUEUE_CONNECTIONS_OPTION
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.reservation import cloud, fallback, multikueue, validation
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
    log: Any
    """The operator's logger (Airflow's structlog logger, or a stdlib one)."""
    multikueue_connections: Mapping[str, str] = field(default_factory=dict)
    """The Airflow connection of each Kueue MultiKueue worker cluster, by MultiKueueCluster name:
    the operator's ``multikueue_connections``, else the ``[gang] multikueue_connections`` option."""


CLOUD_EXTRA = "cloud"
"""The ``kubernetes`` connection extra that names the cluster's cloud profile (``reservation.cloud``)."""


def cloud_profile(argument: str | CloudProfile | None, kubernetes_conn_id: str) -> CloudProfile:
    """The gang's cloud profile: the operator's ``cloud`` argument when given, else the connection's
    extra ``cloud`` (a profile name or a ``CloudProfile.to_dict()`` mapping), else GKE's.

    Read on the worker when a try starts, before anything is created. A connection that does not
    exist yields GKE's profile here; the try then fails on the connection itself. Raises
    :class:`GangArgumentError` naming ``cloud`` and the connection for a value no profile matches.
    """
    if argument is not None:
        try:
            return cloud.profile_of(argument)
        except GangSpecError as error:
            raise GangArgumentError("cloud", error.message) from error
    try:
        extra = BaseHook.get_connection(kubernetes_conn_id).extra_dejson.get(CLOUD_EXTRA)
    except AirflowNotFoundException:
        return cloud.GKE
    if extra is None:
        return cloud.GKE
    try:
        return cloud.profile_of(extra)
    except GangSpecError as error:
        raise GangArgumentError(
            "cloud", f"connection {kubernetes_conn_id!r} extra {CLOUD_EXTRA!r}: {error.message}"
        ) from error


def multikueue_connections(argument: Mapping[str, str] | None) -> dict[str, str]:
    """The MultiKueue worker connections a try uses: the operator's ``multikueue_connections`` (checked
    at parse time) when given, else the deployment-wide ``[gang] multikueue_connections`` option (a
    JSON object; empty: none). Raises :class:`GangArgumentError` naming the option for a bad value."""
    if argument is not None:
        return multikueue.parse_connections(argument)
    configured = conf.get(CONFIG_SECTION, MULTIKUEUE_CONNECTIONS_OPTION, fallback="")
    try:
        return multikueue.parse_connections(configured)
    except multikueue.ConnectionsError as error:
        raise GangArgumentError(
            "multikueue_connections",
            f"the [{CONFIG_SECTION}] {MULTIKUEUE_CONNECTIONS_OPTION} option {error}",
            f"set AIRFLOW__{CONFIG_SECTION.upper()}__{MULTIKUEUE_CONNECTIONS_OPTION.upper()} to a JSON object such as "
            '{"worker-1": "kube_worker1"}, or pass multikueue_connections to the operator',
        ) from error

"""The provider's ``[gang]`` options as this deployment sets them, read on the worker when a try starts.

The options, their types and defaults are ``reservation.deployment.OPTIONS``; Airflow's configuration
(``airflow.cfg``, ``AIRFLOW__GANG__<OPTION>``) may change them. A task's own argument wins over an option:
:func:`client_options` lays the task's ``client_options`` over the configured ``client_*`` values, and
``operators.settings.cloud_profile`` reads ``default_cloud`` only when neither the task nor its
connection names a cloud, :func:`multikueue_connections` ``multikueue_connections`` only when the task
maps no worker itself. A malformed value raises ``GangConfigurationError`` naming the option: the
try then ends ``invalid`` before anything is created.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.airflow_compat import conf
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.reservation import deployment, multikueue
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError, GangConfigurationError


def option(name: str) -> float | int | str:
    """The value of ``[gang] name``, its default when it is not set."""
    spec = deployment.BY_NAME[name]
    text = conf.get(deployment.SECTION, name, fallback=str(spec.default))
    try:
        return spec.parse(str(text))
    except deployment.ConfigurationError as error:
        raise GangConfigurationError(error) from error


def client_options(task_options: Mapping[str, Any]) -> ClientOptions:
    """The task's ``client_options`` over the configured ``[gang] client_*`` values."""
    configured: dict[str, Any] = {}
    for field in deployment.CLIENT_DEFAULTS:
        configured[field] = option(f"client_{field}")
        problem = deployment.client_option_problem({field: configured[field]})
        if problem is not None:
            error = deployment.ConfigurationError(f"client_{field}", problem)
            raise GangConfigurationError(error)
    try:
        return ClientOptions.from_dict({**configured, **task_options})
    except (TypeError, ValueError) as error:
        raise GangArgumentError("client_options", f"{error}") from error


def heartbeat_seconds() -> float:
    return float(option("heartbeat_interval"))


def watch_timeout_seconds() -> int:
    return max(1, int(option("watch_timeout")))


def default_cloud() -> str:
    return str(option("default_cloud"))


def multikueue_connections(task_connections: Mapping[str, str] | None) -> dict[str, str]:
    """The MultiKueue worker connections a try uses: the task's ``multikueue_connections`` (checked when
    the DAG was parsed) when given, else ``[gang] multikueue_connections`` (a JSON object; empty: none)."""
    if task_connections is not None:
        return multikueue.parse_connections(task_connections)
    try:
        return multikueue.parse_connections(option("multikueue_connections"))
    except multikueue.ConnectionsError as error:
        raise GangConfigurationError(deployment.ConfigurationError("multikueue_connections", str(error))) from error

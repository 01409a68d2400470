"""Deployment-wide defaults: the provider's ``[gang]`` section of Airflow's configuration.

One record, :data:`OPTIONS`, names every option with its type, default and description. It is read by
``get_provider_info`` (the ``config`` section Airflow's provider discovery loads and ``airflow config
list`` shows), by the operator on the worker when a try starts (``operators.deployment``), and by the
docs' configuration table (``reservation.tries.argument_table.configuration_table``). A task's own
argument still wins: ``client_options={"request_timeout": 5}`` replaces ``client_request_timeout`` for
that task only, ``cloud="eks"`` replaces ``default_cloud``.

Set an option as any Airflow option is set (https://airflow.apache.org/docs/apache-airflow/stable/howto/set-config.html):
``[gang] client_retry_attempts = 20`` in ``airflow.cfg``, or ``AIRFLOW__GANG__CLIENT_RETRY_ATTEMPTS=20``
in the environment of the workers (the triggerer receives the values with the trigger's arguments).

The ``client_*`` defaults are those of ``kube.options.ClientOptions`` (their reasons are in its
docstring): :data:`CLIENT_DEFAULTS` is the one place they are written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SECTION = "gang"
VERSION_ADDED = "0.1.0"

CLIENT_DEFAULTS: Mapping[str, float | int] = {
    "request_timeout": 30.0,
    "retry_attempts": 10,
    "retry_base_delay": 0.5,
    "retry_max_delay": 30.0,
    "qps": 1000.0,
    "burst": 1000,
    "max_parallel_requests": 32,
}
"""``kube.options.ClientOptions``' fields and defaults (its dataclass reads them from here)."""
WHOLE_CLIENT_OPTIONS = frozenset({"retry_attempts", "burst", "max_parallel_requests"})
"""The client options that are whole numbers >= 1."""
MAX_PARALLEL_REQUESTS = 64
"""Upper bound of ``max_parallel_requests``: kubernetes_asyncio's ``connection_pool_maxsize`` (100
connections per client) less room for watch streams and log reads."""


class ConfigurationError(ValueError):
    """A ``[gang]`` option is set to a value of the wrong kind; ``option`` names it."""

    def __init__(self, option: str, problem: str) -> None:
        variable = f"AIRFLOW__{SECTION.upper()}__{option.upper()}"
        super().__init__(f"Airflow configuration [{SECTION}] {option}: {problem} (set in airflow.cfg or {variable})")
        self.option = option


@dataclass(frozen=True)
class ConfigOption:
    """One option of the ``[gang]`` section: ``kind`` is Airflow's option type (``"float"``,
    ``"integer"``, ``"string"``); ``default`` is used when the option is not set."""

    name: str
    kind: str
    default: float | int | str
    description: str
    example: str

    def parse(self, text: str) -> float | int | str:
        """The option's value from its configured ``text``; :class:`ConfigurationError` names the
        option when ``text`` is not of its kind or is negative."""
        if self.kind == "string":
            return text.strip()
        try:
            value: float | int = int(text) if self.kind == "integer" else float(text)
        except ValueError:
            kind = "a whole number" if self.kind == "integer" else "a number"
            raise ConfigurationError(self.name, f"{text!r} is not {kind}") from None
        if value < 0:
            raise ConfigurationError(self.name, f"{text!r} is negative")
        return value

    def to_provider_info(self) -> dict[str, Any]:
        """The option as Airflow's provider schema describes one (``provider_info.schema.json``,
        ``definitions.option``): defaults are strings, as in ``airflow.cfg``."""
        return {
            "description": self.description,
            "version_added": VERSION_ADDED,
            "type": self.kind,
            "example": self.example,
            "default": str(self.default),
        }


def _client_option(field: str, description: str, example: str) -> ConfigOption:
    default = CLIENT_DEFAULTS[field]
    kind = "integer" if field in WHOLE_CLIENT_OPTIONS else "float"
    return ConfigOption(f"client_{field}", kind, default, description, example)


OPTIONS: tuple[ConfigOption, ...] = (
    _client_option(
        "request_timeout", "Seconds one Kubernetes API request may take (connect, send, read the answer).", "60"
    ),
    _client_option(
        "retry_attempts",
        "Tries per Kubernetes API request, the first included; 429, 5xx and transport errors are retried. "
        "With the default backoff, 10 tries wait about a minute in all: an API server restart.",
        "20",
    ),
    _client_option("retry_base_delay", "Seconds before the first retry; each retry waits twice as long.", "1"),
    _client_option("retry_max_delay", "Longest wait between two retries, in seconds.", "60"),
    _client_option(
        "qps", "Requests per second one client sends after a burst; 0 turns the client-side limit off.", "100"
    ),
    _client_option("burst", "Requests one client may send at once before the qps limit applies.", "100"),
    _client_option(
        "max_parallel_requests",
        f"Requests one client has in flight at most: how many members are created or released at once "
        f"(at most {MAX_PARALLEL_REQUESTS}).",
        "16",
    ),
    ConfigOption(
        "heartbeat_interval",
        "float",
        300.0,
        "Seconds between two log lines of a waiting gang when nothing changed (a heartbeat in the task log).",
        "600",
    ),
    ConfigOption(
        "watch_timeout",
        "integer",
        300,
        "Seconds each WATCH request asks the API server to keep open (timeoutSeconds) before the "
        "watch is resumed; lower it below an idle timeout of a proxy or load balancer in front of the API server.",
        "120",
    ),
    ConfigOption(
        "default_cloud",
        "string",
        "gke",
        "The cloud profile (gke, eks, karpenter or aks) of a gang whose task sets no cloud argument and "
        "whose Kubernetes connection has no cloud extra.",
        "eks",
    ),
    ConfigOption(
        "multikueue_connections",
        "string",
        "",
        "A JSON object mapping Kueue MultiKueueCluster names to the Airflow kubernetes connections that reach "
        "those worker clusters, for every task whose multikueue_connections argument is not set. A worker without "
        "a connection still runs its gangs; they are followed through the manager's mirrored Job status only "
        "(no rank logs, no member detail).",
        '{"worker-1": "kube_worker1", "worker-2": "kube_worker2"}',
    ),
)
BY_NAME: Mapping[str, ConfigOption] = {option.name: option for option in OPTIONS}


def provider_config() -> dict[str, Any]:
    """The ``config`` entry of ``get_provider_info``: the ``[gang]`` section and its options."""
    return {
        SECTION: {
            "description": "Deployment-wide defaults of airflow-provider-gang; a task's own argument wins.",
            "options": {option.name: option.to_provider_info() for option in OPTIONS},
        }
    }


def client_option_problem(values: Mapping[str, Any]) -> str | None:
    """What is wrong with ``values`` as client options (an unknown key, a value that is not a number
    >= 0, a whole-number option that is not whole or below 1, ``max_parallel_requests`` above
    :data:`MAX_PARALLEL_REQUESTS`, a zero ``request_timeout``), or ``None``. Missing keys are fine."""
    unknown = sorted(set(values) - set(CLIENT_DEFAULTS))
    if unknown:
        return f"unknown client option(s) {unknown}; known: {sorted(CLIENT_DEFAULTS)}"
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return f"{name} must be a number >= 0, not {value!r}"
        if name in WHOLE_CLIENT_OPTIONS and (value < 1 or int(value) != value):
            return f"{name} must be a whole number >= 1, not {value!r}"
    if values.get("max_parallel_requests", 0) > MAX_PARALLEL_REQUESTS:
        return f"max_parallel_requests must be <= {MAX_PARALLEL_REQUESTS}, not {values['max_parallel_requests']!r}"
    if values.get("request_timeout", 1) <= 0:
        return f"request_timeout must be > 0, not {values['request_timeout']!r}"
    return None

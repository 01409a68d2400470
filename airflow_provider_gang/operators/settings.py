"""``TrySettings``: what a try needs of the operator's arguments, as rendered values.

Built by ``GangTrainingOperator.try_settings`` at every entry point of a try, after Airflow rendered
the templated fields; frozen, and holding values only, so a try never reads the operator again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.reservation import fallback, validation
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
    none stored yet.
    """

    kubernetes_conn_id: str
    namespace: str
    mode: str
    size: int
    ladder: tuple[fallback.FallbackStep, ...]
    configured: GangSpec | None
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

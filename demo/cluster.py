"""A simulated cluster for the demo and the end-to-end tests, reached through an Airflow connection.

:func:`simulated_cluster` starts a :class:`gang_sim.testing.ClusterHarness` (the Kubernetes API
emulator on a free port of 127.0.0.1 in a background thread, with the simulated control plane of a
scenario: what ``gang-sim serve --scenario`` runs) and points an Airflow connection of type
``kubernetes`` at the kubeconfig it writes, through an ``AIRFLOW_CONN_<ID>`` environment variable
(Airflow reads connections from the environment first:
https://airflow.apache.org/docs/apache-airflow/stable/howto/connection.html#storing-connections-in-environment-variables).

Simulated controller time runs ``time_scale`` times faster than wall-clock time; the operator's own
timeouts stay wall-clock, so a 60x cluster turns "10 minutes of node provisioning" into 10 seconds.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gang_sim.testing import ClusterHarness, ScenarioSource

CONN_ID = "kubernetes_default"
"""The connection the simulated cluster is reachable through, the operator's default connection."""


@contextmanager
def simulated_cluster(
    scenario: ScenarioSource = "demo",
    *,
    time_scale: float | None = 60.0,
    conn_id: str = CONN_ID,
    **emulator_options: Any,
) -> Iterator[ClusterHarness]:
    """Start the emulator and the scenario's controllers; stop both (and unset the connection) on exit.

    ``time_scale=None`` runs the controllers on a ``ManualClock`` (advance it with
    ``cluster.advance(seconds)``); ``emulator_options`` go to the harness (e.g.
    ``preload_crds=False`` for a cluster without the ProvisioningRequest and Kueue CRDs).
    """
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    previous = os.environ.get(variable)
    with ClusterHarness(scenario, time_scale=time_scale, **emulator_options) as harness:
        os.environ[variable] = json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(harness.kubeconfig_path)}}
        )
        try:
            yield harness
        finally:
            if previous is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = previous


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for rendezvous of members that are local processes)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])

"""The reliability suite's fixtures, and its table (:mod:`.table`) printed at the end of the session."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gang_sim.testing import ClusterHarness
from tests.e2e.conftest import airflow_db, cluster_factory  # noqa: F401  # the same fixtures as e2e
from tests.reliability.emulator_side import Control, Ledger
from tests.reliability.table import TABLE, render_table, report

__all__ = ["FaultCluster", "report"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TABLE:
        return
    terminalreporter.section("reliability: faults injected and invariants broken")
    for line in render_table():
        terminalreporter.write_line(line)


@dataclass
class FaultCluster:
    """A simulated cluster with its control endpoints and a ledger following its store."""

    cluster: ClusterHarness
    control: Control
    ledger: Ledger


@pytest.fixture
def fault_cluster_factory(cluster_factory: Any) -> Iterator[Any]:  # noqa: F811
    """``fault_cluster_factory(scenario, time_scale=...)``: a started cluster with a fresh ledger."""
    unsubscribes: list[Any] = []

    def start(scenario: Any = "small", **options: Any) -> FaultCluster:
        cluster = cluster_factory(scenario, **options)
        ledger = Ledger()
        unsubscribes.append((cluster, ledger.attach(cluster)))
        return FaultCluster(cluster, Control(cluster), ledger)

    yield start
    for cluster, unsubscribe in unsubscribes:
        cluster.run(unsubscribe)

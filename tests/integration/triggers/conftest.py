"""Fixtures for trigger tests: the emulator (``sim``), connection settings for it, a setup client - the
same ones the other emulator-backed suite uses, defined in :mod:`tests.unit.kube.emulated`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gang_sim.world.clock import ManualClock
from tests.cluster_time import ClusterTime, on_cluster_time
from tests.unit.kube.emulated import client, connection, register_emulator_marker, sim

__all__ = ["client", "connection", "sim"]


@pytest.fixture
def manual_time() -> Iterator[ClusterTime]:
    """The triggers' clock stands still until the test moves it (``manual_time.simulated.advance``)."""
    with on_cluster_time(ManualClock()) as installed:
        yield installed


def pytest_configure(config: pytest.Config) -> None:
    register_emulator_marker(config)

"""Fixtures for kube/ tests: the emulator (``sim``), connection settings for it, a client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.sim.harness import EmulatorHarness
from tests.unit.kube.emulated import Sim


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[Sim]:
    """A fresh emulator per test; ``@pytest.mark.emulator(history_limit=...)`` passes options."""
    marker = request.node.get_closest_marker("emulator")
    options = dict(marker.kwargs) if marker else {}
    with EmulatorHarness(seed=0, **options) as harness:
        yield Sim(harness)


@pytest.fixture
def connection(sim: Sim) -> dict[str, Any]:
    return sim.connection()


@pytest.fixture
async def client(connection: dict[str, Any]) -> AsyncIterator[KubeClient]:
    """A client for the test's own setup writes (the code under test builds its own)."""
    async with await KubeClient.connect(ConnectionSettings.from_dict(connection)) as setup_client:
        yield setup_client


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "emulator(**options): options for the test's EmulatorHarness")

"""The emulator as kube/ and trigger tests use it: faults and request counts set on its own loop, and the
fixtures both suites' conftests re-export (``sim``, ``connection``, ``client``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.settings import ConnectionSettings
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually_async


class Sim:
    """The started emulator plus its fault and request-count controls (set on its own loop)."""

    def __init__(self, harness: ClusterHarness) -> None:
        self.harness = harness

    @property
    def context(self) -> Any:
        assert self.harness.emulator is not None
        return self.harness.emulator.context

    def set_faults(self, spec: str) -> None:
        """Replace the injected faults (``gang_sim.apiserver.http.faults`` spec syntax); ``""`` clears them."""
        faults = Faults.parse(spec)
        self.harness.run(lambda: setattr(self.context, "faults", faults))

    def metrics(self) -> dict[str, Any]:
        """``{"total", "requests": {verb: {resource: n}}, "codes"}`` counted by the emulator."""
        snapshot: dict[str, Any] = self.harness.run(self.context.metrics.snapshot)
        return snapshot

    def reset_metrics(self) -> None:
        self.harness.run(self.context.metrics.reset)

    async def until_a_watch_ends(self, timeout: float = 10.0) -> None:
        """Wait until the emulator has ended one more request with 200. It counts a response code
        once the handler returns, which for a WATCH is when its stream ends (a ``watch-cut``), so a
        write after this lands on the watch that follows, or in no watch at all."""
        ended = self.metrics()["codes"].get("200", 0)
        await eventually_async(
            lambda: self.metrics()["codes"].get("200", 0) > ended, timeout=timeout, what="the server to end a watch"
        )

    def connection(self) -> dict[str, Any]:
        kubeconfig = yaml.safe_load(self.harness.kubeconfig_path.read_text())
        return ConnectionSettings(kubeconfig=kubeconfig).to_dict()


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[Sim]:
    """A fresh emulator per test; ``@pytest.mark.emulator(history_limit=...)`` passes options."""
    marker = request.node.get_closest_marker("emulator")
    options = dict(marker.kwargs) if marker else {}
    with ClusterHarness(seed=0, **options) as harness:
        yield Sim(harness)


@pytest.fixture
def connection(sim: Sim) -> dict[str, Any]:
    return sim.connection()


@pytest.fixture
async def client(connection: dict[str, Any]) -> AsyncIterator[KubeClient]:
    """A client for the test's own setup writes (the code under test builds its own)."""
    async with await KubeClient.connect(ConnectionSettings.from_dict(connection)) as setup_client:
        yield setup_client


def register_emulator_marker(config: pytest.Config) -> None:
    """For the conftests' ``pytest_configure``."""
    config.addinivalue_line("markers", "emulator(**options): options for the test's ClusterHarness")

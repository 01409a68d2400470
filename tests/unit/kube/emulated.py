"""The emulator as kube/ and trigger tests use it: faults and request counts set on its own loop."""

from __future__ import annotations

from typing import Any

import yaml

from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.sim.api.faults import Faults
from airflow_provider_gang.sim.harness import EmulatorHarness


class Sim:
    """The started emulator plus its fault and request-count controls (set on its own loop)."""

    def __init__(self, harness: EmulatorHarness) -> None:
        self.harness = harness

    @property
    def context(self) -> Any:
        assert self.harness.emulator is not None
        return self.harness.emulator.context

    def set_faults(self, spec: str) -> None:
        """Replace the injected faults (``sim.api.faults`` spec syntax); ``""`` clears them."""
        faults = Faults.parse(spec)
        self.harness.run(lambda: setattr(self.context, "faults", faults))

    def metrics(self) -> dict[str, Any]:
        """``{"total", "requests": {verb: {resource: n}}, "codes"}`` counted by the emulator."""
        snapshot: dict[str, Any] = self.harness.run(self.context.metrics.snapshot)
        return snapshot

    def reset_metrics(self) -> None:
        self.harness.run(self.context.metrics.reset)

    def connection(self) -> dict[str, Any]:
        kubeconfig = yaml.safe_load(self.harness.kubeconfig_path.read_text())
        return ConnectionSettings(kubeconfig=kubeconfig).to_dict()

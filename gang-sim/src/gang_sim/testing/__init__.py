"""Running the emulator from tests, benches and the demo.

- :mod:`.harness`: the API server alone in a background thread (:class:`~.harness.EmulatorHarness`).
- :mod:`.cluster_harness`: the API server plus the simulated control plane of a scenario.
- :mod:`.eventually`: poll a condition with a deadline instead of sleeping a fixed time.
- :mod:`.pytest_plugin`: fixtures for both harnesses (``pytest_plugins = [...]`` in a conftest).
"""

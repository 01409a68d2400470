"""The emulator's one public test entry point.

- :class:`ClusterHarness` (:mod:`.harness`): the API server in a background thread of the caller's
  process, alone or with the simulated control plane of a scenario (ManualClock, or a ScaledClock with
  ``time_scale=N``); ``run`` touches the store on the server loop.
- :func:`eventually` / :func:`eventually_async` (:mod:`.eventually`): poll a condition with a deadline
  instead of sleeping a fixed time.
- :mod:`.pytest_plugin` (loaded with ``pytest_plugins = ["gang_sim.testing.pytest_plugin"]``; needs the
  ``gang-sim[testing]`` extra): the ``emulator`` fixture (a started :class:`ClusterHarness`) and the
  ``sim_cluster`` fixture (:class:`~.pytest_plugin.SimCluster`: a scenario's cluster with ``kubernetes``
  clients, checked on teardown for stored objects mutated after their commit).

These names are stable: other harnesses (another control plane than the emulator) sit beside them as
subpackages of this one.
"""

from gang_sim.testing.eventually import eventually, eventually_async
from gang_sim.testing.harness import ClusterHarness, ScenarioSource, scenario_of

__all__ = ["ClusterHarness", "ScenarioSource", "eventually", "eventually_async", "scenario_of"]

"""A thread harness for an emulator *with* the simulated control plane (tests, benches, demos).

::

    with SimulatedClusterHarness(scenario=load_scenario("small")) as cluster:   # ManualClock
        ...create objects with kubernetes / kubernetes_asyncio / kubectl via cluster.kubeconfig_path...
        cluster.advance(600)          # ten simulated minutes, deadline by deadline
        cluster.now()                 # simulated seconds
        cluster.preempt("gke-sim-l4-spot-b2c4")   # a spot termination notice now (POST /_sim/preemptions)

Pass ``time_scale=N`` instead to run on a :class:`ScaledClock` (simulated time N times real time).
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver.server import Emulator
from gang_sim.controllers.attach import AttachedControlPlane, attach
from gang_sim.testing.harness import EmulatorHarness
from gang_sim.world.clock import Clock, ManualClock, ScaledClock
from gang_sim.world.scenario import Scenario
from gang_sim.world.scenario_preemptions import (
    DEFAULT_NOTICE_SECONDS,
    DEFAULT_POD_GRACE_PERIOD_SECONDS,
)


class SimulatedClusterHarness(EmulatorHarness):
    def __init__(self, *, scenario: Scenario, time_scale: float | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.scenario = scenario
        self.clock: Clock = ManualClock() if time_scale is None else ScaledClock(time_scale)
        self.control: AttachedControlPlane | None = None

    def __enter__(self) -> SimulatedClusterHarness:
        self.start()
        return self

    def _build_emulator(self) -> Emulator:
        emulator = super()._build_emulator()
        self.control = attach(emulator, self.scenario, self.clock)
        return emulator

    def now(self) -> float:
        return float(self.run(self.clock.now))

    def advance(self, seconds: float, timeout: float = 60.0) -> float:
        """Advance the ManualClock on the server loop, letting controllers act at every deadline."""
        clock = self.clock
        if not isinstance(clock, ManualClock):
            raise TypeError("advance() needs the ManualClock (construct without time_scale)")
        return float(self.run(lambda: clock.run_for(seconds), timeout=timeout))

    def preempt(
        self,
        node: str | None = None,
        *,
        pool: str | None = None,
        count: int = 1,
        at: float | None = None,
        notice_seconds: float = DEFAULT_NOTICE_SECONDS,
        pod_grace_period_seconds: float = DEFAULT_POD_GRACE_PERIOD_SECONDS,
    ) -> list[str]:
        """Send a spot termination notice to ``node`` (or ``count`` nodes of ``pool``) at simulated
        time ``at`` (default now), as ``POST /_sim/preemptions`` does; the nodes noticed now (empty when
        ``at`` is later). Raises ScenarioError / ApiError as that endpoint answers 400 / 404 / 409."""
        control = self.control
        if control is None:
            raise RuntimeError("the control plane is not running")
        body: dict[str, Any] = {"noticeSeconds": notice_seconds, "podGracePeriodSeconds": pod_grace_period_seconds}
        body.update({"node": node} if node is not None else {"pool": pool, "count": count})
        if at is not None:
            body["at"] = at
        return list(self.run(lambda: control.preempt(body))["nodes"])

    def gpu_seconds(self) -> float:
        control = self.control
        if control is None or control.running is None:
            raise RuntimeError("the control plane is not running")
        cloud = control.running.plane.cloud
        return float(self.run(lambda: cloud.gpu_seconds(self.clock.now())))

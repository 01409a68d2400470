"""Attach the simulated control plane to an :class:`~gang_sim.apiserver.server.Emulator`.

:func:`attach` must be called before ``Emulator.start()``: it turns on the scenario's
``featureGates`` in the API server (:mod:`gang_sim.apiserver.feature_gates`), adds the
``/_sim/clock`` control endpoint and startup/cleanup hooks that run the controllers on the server's
event loop.

``/_sim/clock`` (no token, like the other ``/_sim/`` endpoints):

- ``GET`` -> ``{"kind": "ScaledClock"|"ManualClock", "now": <simulated seconds>, "timeScale": N,
  "scenario": <name>, "gpuSeconds": <billed GPU-seconds so far>}``
- ``POST {"advance": <seconds>}`` (ManualClock only, else 409) moves simulated time forward deadline by
  deadline (:meth:`ManualClock.run_for`) and answers like ``GET``. Negative or non-numeric values -> 400.

``/_sim/preemptions`` (spot termination notices, :mod:`.preemption`):

- ``GET`` -> ``{"preemptions": [{"at", "pool"|"node", "count", "noticeSeconds", "podGracePeriodSeconds",
  "applied", "nodes"}...]}``, the scenario's and the requested ones in request order;
- ``POST {"node": "<name>"}`` or ``{"pool": "<pool>", "count": N}``, optional ``"at"`` (simulated
  seconds; default now), ``"noticeSeconds"``, ``"podGracePeriodSeconds"`` (the scenario's
  ``preemptions`` fields, :mod:`..world.scenario_preemptions`) -> 201 with that preemption; one due now is
  applied before the answer (``nodes`` lists the nodes noticed). 400 for a bad body, 404 for a node
  that does not exist, 409 for a node already shutting down.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gang_sim.apiserver.errors import ApiError
from gang_sim.apiserver.feature_gates import enable as enable_feature_gates
from gang_sim.controllers import plane
from gang_sim.controllers.preemption import NodeTerminationController
from gang_sim.world.clock import Clock, ManualClock
from gang_sim.world.scenario import Scenario
from gang_sim.world.scenario_fields import ScenarioError
from gang_sim.world.scenario_preemptions import parse_preemption

if TYPE_CHECKING:
    from gang_sim.apiserver.server import Emulator


@dataclass
class AttachedControlPlane:
    """Handle on the control plane of one emulator (``running`` is set once the server started)."""

    scenario: Scenario
    clock: Clock
    running: plane.RunningControlPlane | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        body = dict(self.clock.describe())
        body["scenario"] = self.scenario.name
        if self.running is not None:
            body["gpuSeconds"] = self.running.plane.cloud.gpu_seconds(self.clock.now())
        return body

    def preemption_controller(self) -> NodeTerminationController:
        if self.running is None:
            raise RuntimeError("the control plane is not running")
        found = self.running.controller(NodeTerminationController)
        assert isinstance(found, NodeTerminationController)
        return found

    async def preempt(self, body: object) -> dict[str, Any]:
        """Schedule one preemption from a ``POST /_sim/preemptions`` body (see module docstring); on a
        ManualClock the controllers settle before it returns (the kubelet has stopped the simulated
        pods). Raises ScenarioError (bad body) or ApiError 404/409 (node missing / already noticed)."""
        controller = self.preemption_controller()
        now = self.clock.now()
        if isinstance(body, dict) and "at" not in body:
            body = {**body, "at": now}
        spec = parse_preemption(body, "", [pool.name for pool in self.scenario.node_pools])
        if spec.node is not None and spec.at <= now:
            try:
                controller.store.get("v1/nodes", spec.node)
            except ApiError:
                raise ApiError(404, "NotFound", f"node {spec.node!r} does not exist") from None
            if spec.node in controller.cloud.shutdowns:
                raise ApiError(409, "Conflict", f"node {spec.node!r} already got a termination notice")
        record = controller.request(spec)
        if isinstance(self.clock, ManualClock):
            await self.clock.run_for(0)
        return record.to_json()


def attach(emulator: Emulator, scenario: Scenario, clock: Clock) -> AttachedControlPlane:
    """Run ``scenario``'s controllers with ``clock`` while ``emulator`` serves."""
    attached = AttachedControlPlane(scenario=scenario, clock=clock)
    enable_feature_gates(emulator.store.registry, scenario.feature_gates)

    async def start(server: Emulator) -> None:
        attached.running = plane.start(server.store, scenario, clock)

    async def stop(server: Emulator) -> None:
        if attached.running is not None:
            await attached.running.stop()

    async def clock_endpoint(request: web.Request) -> web.Response:
        if request.method == "GET":
            return web.json_response(attached.describe())
        if request.method != "POST":
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
        if not isinstance(clock, ManualClock):
            return web.json_response(
                {"error": "the clock is real-time scaled; only a ManualClock can be advanced"}, status=409
            )
        try:
            body = json.loads(await request.text() or "{}")
            seconds = float(body["advance"])
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": 'expected a JSON body {"advance": <seconds>}'}, status=400)
        if seconds < 0:
            return web.json_response({"error": "time cannot move backwards"}, status=400)
        await clock.run_for(seconds)
        return web.json_response(attached.describe())

    async def preemptions_endpoint(request: web.Request) -> web.Response:
        if request.method == "GET":
            records = attached.preemption_controller().records
            return web.json_response({"preemptions": [record.to_json() for record in records]})
        if request.method != "POST":
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
        try:
            body = json.loads(await request.text() or "{}")
            return web.json_response(await attached.preempt(body), status=201)
        except (ValueError, ScenarioError) as error:
            return web.json_response({"error": str(error)}, status=400)
        except ApiError as error:
            return web.json_response({"error": error.message}, status=error.code)

    emulator.app.router.add_route("*", "/_sim/clock", clock_endpoint)
    emulator.app.router.add_route("*", "/_sim/preemptions", preemptions_endpoint)
    emulator.on_startup.append(start)
    emulator.on_cleanup.append(stop)
    return attached

"""Attach the simulated control plane to an :class:`~airflow_provider_gang.sim.server.Emulator`.

:func:`attach` must be called before ``Emulator.start()``: it adds the ``/_sim/clock`` control
endpoint and startup/cleanup hooks that run the controllers on the server's event loop.

``/_sim/clock`` (no token, like the other ``/_sim/`` endpoints):

- ``GET`` -> ``{"kind": "ScaledClock"|"ManualClock", "now": <simulated seconds>, "timeScale": N,
  "scenario": <name>, "gpuSeconds": <billed GPU-seconds so far>}``
- ``POST {"advance": <seconds>}`` (ManualClock only, else 409) moves simulated time forward deadline by
  deadline (:meth:`ManualClock.run_for`) and answers like ``GET``. Negative or non-numeric values -> 400.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from airflow_provider_gang.sim.clock import Clock, ManualClock
from airflow_provider_gang.sim.controllers import plane
from airflow_provider_gang.sim.scenario import Scenario

if TYPE_CHECKING:
    from airflow_provider_gang.sim.server import Emulator


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


def attach(emulator: Emulator, scenario: Scenario, clock: Clock) -> AttachedControlPlane:
    """Run ``scenario``'s controllers with ``clock`` while ``emulator`` serves."""
    attached = AttachedControlPlane(scenario=scenario, clock=clock)

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

    emulator.app.router.add_route("*", "/_sim/clock", clock_endpoint)
    emulator.on_startup.append(start)
    emulator.on_cleanup.append(stop)
    return attached

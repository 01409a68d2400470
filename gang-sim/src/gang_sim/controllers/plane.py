"""Assemble and run the simulated control plane on a Store.

:func:`start` builds the shared :class:`~.base.ControlPlane` (clock, seeded random source, scenario,
cloud), registers the scenario's initial nodes, creates its ``objects`` (in order), subscribes every
controller to the Store and runs each controller loop as a task. :meth:`RunningControlPlane.stop`
cancels them. This is what the
emulator's startup hook calls (``gang-sim serve --scenario NAME|FILE --time-scale N``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gang_sim.apiserver.store import Store
from gang_sim.controllers import webhooks
from gang_sim.controllers.autoscaler.cluster_autoscaler import ClusterAutoscaler
from gang_sim.controllers.base import Controller, ControlPlane, Obj
from gang_sim.controllers.jobs import JobController
from gang_sim.controllers.kubelet.controller import Kubelet
from gang_sim.controllers.kueue.dispatcher import MultiKueueDispatcher
from gang_sim.controllers.kueue.manager import KueueManager
from gang_sim.controllers.node_registration import register_node
from gang_sim.controllers.preemption import NodeTerminationController
from gang_sim.controllers.scheduler import Scheduler
from gang_sim.world.clock import Clock, ManualClock
from gang_sim.world.cloud import Cloud
from gang_sim.world.scenario import Scenario
from gang_sim.world.scenario_objects import create_objects


def default_controllers() -> list[type[Controller]]:
    """The controllers a scenario runs, in start order."""
    return [
        Scheduler,
        Kubelet,
        JobController,
        ClusterAutoscaler,
        KueueManager,
        MultiKueueDispatcher,
        NodeTerminationController,
    ]


#: The controllers that run in the cluster's control plane (kube-scheduler, kube-controller-manager,
#: the cluster-autoscaler, Kueue's controller manager) and so go down with it; the kubelets and the
#: cloud's spot notices live on the nodes and in the cloud, which a control-plane restart leaves running.
CONTROL_PLANE_CONTROLLERS: tuple[type[Controller], ...] = (
    Scheduler,
    JobController,
    ClusterAutoscaler,
    KueueManager,
    MultiKueueDispatcher,
)


@dataclass
class RunningControlPlane:
    plane: ControlPlane
    controllers: list[Controller]
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    unsubscribe: Callable[[], Any] | None = None
    uninstall_webhooks: Callable[[], None] | None = None

    def controller(self, kind: type[Controller]) -> Controller:
        for controller in self.controllers:
            if isinstance(controller, kind):
                return controller
        raise KeyError(kind.__name__)

    async def restart(
        self,
        kinds: tuple[type[Controller], ...] = CONTROL_PLANE_CONTROLLERS,
        while_down: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Kill the controllers of ``kinds``, await ``while_down``, then start new ones in their place.

        The new controllers begin with empty memory and rebuild what they need from the Store (and, for
        the autoscaler, the cloud), as a restarted component lists its informers' objects again; the
        Store, the nodes and the other controllers keep running.
        """
        restarted = [index for index, controller in enumerate(self.controllers) if isinstance(controller, kinds)]
        for index in restarted:
            task = self.tasks[index]
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self.controllers[index].close()
        if while_down is not None:
            await while_down()
        for index in restarted:
            replacement = type(self.controllers[index])(self.plane)
            self.controllers[index] = replacement
            self.tasks[index] = asyncio.create_task(replacement.run(), name=f"sim-{replacement.component}")

    async def stop(self) -> None:
        if self.unsubscribe is not None:
            self.unsubscribe()
        if self.uninstall_webhooks is not None:
            self.uninstall_webhooks()
        if isinstance(self.plane.clock, ManualClock):
            self.plane.clock.is_settled = None
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.tasks.clear()
        for controller in self.controllers:
            await controller.close()


def build(
    store: Store, scenario: Scenario, clock: Clock, controllers: list[type[Controller]] | None = None
) -> RunningControlPlane:
    """Create the control plane objects without starting loops (for :func:`start` and tests)."""
    rng = random.Random(scenario.seed)
    plane = ControlPlane(store=store, clock=clock, scenario=scenario, rng=rng, cloud=Cloud(scenario, rng))
    for pool in scenario.node_pools:
        for _ in range(pool.initial_nodes):
            register_node(store, pool, plane.cloud.add_initial_node(pool))
    create_objects(store, scenario.objects)
    instances = [kind(plane) for kind in (controllers if controllers is not None else default_controllers())]
    return RunningControlPlane(plane=plane, controllers=instances)


def start(
    store: Store, scenario: Scenario, clock: Clock, controllers: list[type[Controller]] | None = None
) -> RunningControlPlane:
    """Build the control plane and run every controller loop on the current event loop."""
    running = build(store, scenario, clock, controllers)
    running.uninstall_webhooks = webhooks.install(store)

    def notify(event_type: str, resource: str, obj: Obj) -> None:
        for controller in running.controllers:
            controller.notify(event_type, resource, obj)

    running.unsubscribe = store.subscribe(notify, shared=True)
    if isinstance(clock, ManualClock):
        clock.is_settled = lambda: all(controller.is_idle() for controller in running.controllers)
    for controller in running.controllers:
        running.tasks.append(asyncio.create_task(controller.run(), name=f"sim-{controller.component}"))
    return running

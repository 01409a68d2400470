"""The one harness for running the emulator from tests, benches and demos: :class:`ClusterHarness`.

The emulator gets its own event loop in a daemon thread, so synchronous code (the sync client,
kubectl subprocesses, pytest) and other event loops talk to it over real sockets, and the test reads
and writes the store directly on that loop with :meth:`ClusterHarness.run`::

    with ClusterHarness() as cluster:                              # the API server alone
        subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig_path), "get", "pods"])
        cluster.objects("v1/pods")                                 # read on the server loop

    with ClusterHarness(scenario="small") as cluster:              # plus the simulated control plane
        cluster.advance(600)          # ManualClock: ten simulated minutes, deadline by deadline
        cluster.now(); cluster.gpu_seconds()
        cluster.preempt("gke-sim-l4-spot-b2c4")   # a spot termination notice (POST /_sim/preemptions)
        cluster.restart_api_server(5)             # killed, down 5 s, serving its store again
        cluster.restart_control_plane(5)          # the same, and the controllers started again empty

With a scenario, ``time_scale=N`` runs the controllers on a :class:`ScaledClock` (simulated time N
times real time) instead of a :class:`ManualClock`; ``record_changes=True`` keeps every committed
change for :meth:`ClusterHarness.changes`. Other keyword arguments go to
:class:`~gang_sim.apiserver.server.Emulator` (``faults=``, ``seed=``, ``preload_crds=`` ...).

``served=True`` runs the same emulator as ``gang-sim serve`` in a subprocess instead
(:mod:`.served`; its output in ``log_path``): the scenario is a name or file, ``time_scale`` is
required with one (the command runs a ScaledClock), and only the options the command has are taken
(``faults`` as a spec string, ``seed``, ``serve_kueue_v1beta1``). What needs the store in this process
(``run``, ``store``, ``objects``, ``create``, ``add_user``, ``changes``) is then unavailable; the clock,
``gpu_seconds`` and ``preempt`` go through the ``/_sim/`` endpoints.
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gang_sim.apiserver.http.auth import Rule
from gang_sim.apiserver.server import Emulator
from gang_sim.apiserver.store import Store
from gang_sim.controllers.attach import AttachedControlPlane, attach
from gang_sim.testing.served import ServedEmulator
from gang_sim.testing.started import Started
from gang_sim.world.clock import Clock, ManualClock, ScaledClock
from gang_sim.world.scenario import Scenario, load_scenario, parse_scenario
from gang_sim.world.scenario_preemptions import DEFAULT_NOTICE_SECONDS, DEFAULT_POD_GRACE_PERIOD_SECONDS

ScenarioSource = Scenario | str | dict[str, Any]
"""A :class:`Scenario`, the name of a shipped one (or a scenario file's path), or a decoded document."""
_SERVE_FLAGS = {"faults": "--faults", "seed": "--seed"}
"""Emulator options ``gang-sim serve`` takes as ``--flag VALUE``."""


def scenario_of(source: ScenarioSource) -> Scenario:
    """The :class:`Scenario` ``source`` names (:func:`load_scenario`) or describes (:func:`parse_scenario`)."""
    if isinstance(source, Scenario):
        return source
    if isinstance(source, dict):
        return parse_scenario(source)
    return load_scenario(source)


class ClusterHarness(Started):
    """Start/stop an emulator on a free port of 127.0.0.1, with a scenario's control plane if given."""

    def __init__(
        self,
        scenario: ScenarioSource | None = None,
        *,
        time_scale: float | None = None,
        record_changes: bool = False,
        served: bool = False,
        log_path: str | Path | None = None,
        start_timeout: float = 30.0,
        kubeconfig_path: str | Path | None = None,
        **emulator_options: Any,
    ) -> None:
        self.scenario = None if scenario is None else scenario_of(scenario)
        self.clock: Clock = ManualClock() if time_scale is None else ScaledClock(time_scale)
        self.control: AttachedControlPlane | None = None
        self.served: ServedEmulator | None = None
        self._own_directory: Path | None = None  # a served emulator's kubeconfig and log, when not given
        self._serve_arguments = (
            _serve_arguments(scenario, time_scale, record_changes, emulator_options) if served else None
        )
        self._log_path = None if log_path is None else Path(log_path)
        self._options = emulator_options
        self._start_timeout = start_timeout
        self._requested_kubeconfig = kubeconfig_path
        self._record_changes = record_changes
        self._changes: list[tuple[str, str, dict[str, Any]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.emulator: Emulator | None = None
        self.kubeconfig_path = Path()
        self.url = ""

    def start(self) -> None:
        if self._serve_arguments is not None:
            self._start_served(self._serve_arguments)
            return
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="gang-sim", daemon=True)
        self._thread.start()

        async def build_and_start() -> Emulator:
            emulator = Emulator(**self._options)
            if self.scenario is not None:
                self.control = attach(emulator, self.scenario, self.clock)
            await emulator.start()
            if self._record_changes:
                emulator.store.subscribe(self._record)
            return emulator

        try:
            self.emulator = asyncio.run_coroutine_threadsafe(build_and_start(), loop).result(self._start_timeout)
        except BaseException:
            self.stop()  # do not leave the loop thread behind
            raise
        self.url = self.emulator.url
        self.kubeconfig_path = self.emulator.write_kubeconfig(self._requested_kubeconfig)

    def _start_served(self, arguments: list[str]) -> None:
        own = Path(tempfile.mkdtemp(prefix="gang-sim-"))  # what the caller did not place goes here
        self._own_directory = own
        self.kubeconfig_path = Path(self._requested_kubeconfig or own / "kubeconfig")
        log_path = self._log_path or own / "gang-sim.log"
        self.served = ServedEmulator(arguments, kubeconfig_path=self.kubeconfig_path, log_path=log_path)
        try:
            self.url = self.served.start(self._start_timeout)
        except BaseException:
            self.stop()
            raise

    def describe(self) -> str:
        """State for failure messages (also once stopped): a served process's log tail, or the clock and
        the last recorded changes of an in-thread one."""
        if self.served is not None:
            return self.served.describe()
        if self._loop is None:
            return f"--- emulator at {self.url or '(not started)'}: stopped"
        control = self.control
        clock = self.run(lambda: control.describe()) if control is not None else "API server only"
        changes = [f"{event} {obj.get('kind')}/{obj['metadata']['name']}" for event, _, obj in list(self._changes)]
        return f"--- emulator at {self.url} ({clock}), last changes:\n" + "\n".join(changes[-20:])

    # -- the API server ------------------------------------------------------------------------------

    def _in_process(self) -> Emulator:
        if self.served is not None:
            raise RuntimeError("the emulator is served in a subprocess: its store is not in this process")
        if self.emulator is None:
            raise RuntimeError("the harness is not started")
        return self.emulator

    @property
    def store(self) -> Store:
        return self._in_process().store

    @property
    def token(self) -> str:
        """The admin's bearer token (the one in :attr:`kubeconfig_path`)."""
        if self.served is not None:
            return self.served.token()
        return self._in_process().admin_token

    def run(self, function: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Call ``function`` on the server loop and return its result (awaited if it is awaitable)."""
        self._in_process()
        if self._loop is None:
            raise RuntimeError("the harness is not started")

        async def call() -> Any:
            result = function()
            if inspect.isawaitable(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout)

    def restart_api_server(self, down_seconds: float = 0.0) -> None:
        """Kill the API server and serve again on the same URL after ``down_seconds`` of refused
        connections (:meth:`Emulator.restart <gang_sim.apiserver.server.Emulator.restart>`: objects and
        resourceVersions kept, every connection and watch cut, older resourceVersions 410)."""
        emulator = self._in_process()
        self.run(lambda: emulator.restart(down_seconds), timeout=down_seconds + 30.0)

    def objects(
        self, resource: str, namespace: str | None = "default", label_selector: str = ""
    ) -> list[dict[str, Any]]:
        """Objects of ``resource`` (a store key such as ``"v1/pods"``; ``namespace=None``: all namespaces)."""
        items, _ = self.run(lambda: self.store.list(resource, namespace, label_selector=label_selector))
        return list(items)

    def create(self, resource: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Create an object directly in the store, through its admission (set-up such as Kueue queues)."""
        created: dict[str, Any] = self.run(lambda: self.store.create(resource, body, namespace))
        return created

    def add_user(self, user: str, rules: Iterable[Rule]) -> tuple[str, Path]:
        """Register a user; returns its token and a kubeconfig file for it."""
        emulator = self._in_process()
        token: str = self.run(lambda: emulator.add_user(user, rules))
        return token, emulator.write_kubeconfig(token=token)

    def _record(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        self._changes.append((event_type, resource, obj))

    def changes(self, resource_suffix: str = "") -> list[tuple[str, dict[str, Any]]]:
        """``(event type, object)`` of every change committed since the start to a resource whose key ends
        with ``resource_suffix`` (e.g. ``"/provisioningrequests"``, ``"v1/pods"``), in order; needs
        ``record_changes=True``."""
        if not self._record_changes:
            raise RuntimeError("construct the harness with record_changes=True to read its changes")
        recorded: list[tuple[str, str, dict[str, Any]]] = self.run(lambda: list(self._changes))
        return [(event, obj) for event, resource, obj in recorded if resource.endswith(resource_suffix)]

    def restart_control_plane(self, down_seconds: float = 0.0) -> None:
        """Kill the cluster's control plane and start it again after ``down_seconds``: the API server as
        :meth:`restart_api_server` does, and the scheduler, the job controller, the cluster-autoscaler
        and Kueue (:data:`~gang_sim.controllers.plane.CONTROL_PLANE_CONTROLLERS`) as new controllers with
        empty memory, rebuilt from the store; the nodes' kubelets and the cloud keep running."""
        emulator = self._in_process()
        running = self._control().running
        if running is None:
            raise RuntimeError("the control plane is not running")
        self.run(
            lambda: running.restart(while_down=lambda: emulator.restart(down_seconds)), timeout=down_seconds + 30.0
        )

    # -- the simulated control plane (with a scenario) ------------------------------------------------

    def _control(self) -> AttachedControlPlane:
        if self.control is None:
            raise RuntimeError("no control plane: construct the harness with a scenario")
        return self.control

    def _served_control(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The answer of a served emulator's control endpoint (None when the emulator runs in this process)."""
        if self.served is None:
            return None
        if self.scenario is None:
            raise RuntimeError("no control plane: construct the harness with a scenario")
        return self.served.request(method, path, body)

    def now(self) -> float:
        """Simulated seconds on the control plane's clock."""
        served = self._served_control("GET", "/_sim/clock")
        if served is not None:
            return float(served["now"])
        self._control()
        return float(self.run(self.clock.now))

    def advance(self, seconds: float, timeout: float = 60.0) -> float:
        """Advance the ManualClock on the server loop, letting controllers act at every deadline."""
        clock = self.clock
        if not isinstance(clock, ManualClock):
            raise TypeError("advance() needs the ManualClock (construct without time_scale)")
        self._control()
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
        ``at`` is later). Raises ScenarioError / ApiError as that endpoint answers 400 / 404 / 409 (a
        served emulator: urllib's HTTPError with that code)."""
        body: dict[str, Any] = {"noticeSeconds": notice_seconds, "podGracePeriodSeconds": pod_grace_period_seconds}
        body.update({"node": node} if node is not None else {"pool": pool, "count": count})
        if at is not None:
            body["at"] = at
        served = self._served_control("POST", "/_sim/preemptions", body)
        if served is not None:
            return list(served["nodes"])
        control = self._control()
        return list(self.run(lambda: control.preempt(body))["nodes"])

    def gpu_seconds(self) -> float:
        """GPU-seconds the simulated cloud billed so far."""
        served = self._served_control("GET", "/_sim/clock")
        if served is not None:
            return float(served["gpuSeconds"])
        control = self._control()
        if control.running is None:
            raise RuntimeError("the control plane is not running")
        cloud = control.running.plane.cloud
        return float(self.run(lambda: cloud.gpu_seconds(self.clock.now())))

    # -- stopping ---------------------------------------------------------------------------------------

    @staticmethod
    async def _stop_emulator(emulator: Emulator) -> None:
        await emulator.stop()
        # Let the closed connections' transports run their connection_lost callbacks.
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for _ in range(3):
            await asyncio.sleep(0)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the emulator and its loop thread, or its process (idempotent)."""
        if self.served is not None:
            self.served.stop(timeout)
            if self._own_directory is not None:
                shutil.rmtree(self._own_directory, ignore_errors=True)
                self._own_directory = None
            return
        loop, emulator = self._loop, self.emulator
        if loop is None:
            return
        try:
            if emulator is not None:
                asyncio.run_coroutine_threadsafe(self._stop_emulator(emulator), loop).result(timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout)
            loop.close()
            self._loop = None
            if self._requested_kubeconfig is None and self.kubeconfig_path.name:
                self.kubeconfig_path.unlink(missing_ok=True)


def _serve_arguments(
    scenario: ScenarioSource | None, time_scale: float | None, record_changes: bool, options: dict[str, Any]
) -> list[str]:
    """The ``gang-sim serve`` arguments of a served harness's options; ValueError / TypeError for options
    only an in-process emulator has."""
    arguments = ["--port", "0"]
    if scenario is not None:
        if not isinstance(scenario, str):
            raise ValueError("a served emulator takes its scenario by name or file")
        if time_scale is None:
            raise ValueError("a served emulator runs its scenario on a ScaledClock: pass time_scale")
        arguments += ["--scenario", scenario, "--time-scale", str(time_scale)]
    if record_changes:
        raise ValueError("a served emulator's changes are not recorded in this process")
    for name, value in options.items():
        if name == "serve_kueue_v1beta1":
            arguments += ["--serve-kueue-v1beta1"] if value else []
        elif name in _SERVE_FLAGS and value is not None:
            arguments += [_SERVE_FLAGS[name], str(value)]
        elif name not in _SERVE_FLAGS:
            raise TypeError(f"gang-sim serve has no option for {name}")
    return arguments

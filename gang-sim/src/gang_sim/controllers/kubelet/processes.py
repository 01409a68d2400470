"""The kubelet's *local-process* runtime: containers of listed images run as real subprocesses.

A pod whose every container image matches a pattern of the scenario's ``localProcessImages`` (or of
``gang-sim serve --local-images``; fnmatch-style globs, :mod:`...world.images`) runs here instead of in the
simulated runtime. Each container's ``command`` + ``args`` (required: there is no image to supply an
entrypoint) is started with ``asyncio.create_subprocess_exec`` in ``workingDir`` (else a
private temporary directory), with this environment:

- ``PATH``, ``HOME``, ``LANG``, ``TMPDIR`` of the emulator, the container's ``env`` as the kubelet
  builds it (:mod:`.container_env`: ``value``, downward-API ``fieldRef``, ``configMapKeyRef`` read
  from the Store when the pod starts - a missing ConfigMap or key keeps the pod ``Pending`` in
  ``CreateContainerConfigError`` until it exists, see the kubelet); ``HOSTNAME`` = the pod hostname;
- **name resolution** (:mod:`.resolver`): hostnames of pods behind a headless Service
  (``<hostname>.<subdomain>[.<namespace>[.svc[.cluster.local]]]``) resolve to pod IPs through a
  ``sitecustomize.py`` on ``PYTHONPATH`` and, when ``cc`` is available, an ``LD_PRELOAD`` libc
  resolver shim for native code (exactly what each covers: the :mod:`.resolver` docstring), so a
  PyTorch DDP rendezvous on ``MASTER_ADDR=trainer-0.trainer`` works between pods;
- every pod has its own loopback address (``status.podIP``, see the kubelet); Linux routes all of
  127.0.0.0/8 to ``lo`` without configuration. The processes share the host's network namespace, so
  the shim also narrows Python binds to ``0.0.0.0``/``""`` to the pod IP (``GANG_SIM_POD_IP``). Servers
  binding the wildcard address from native code (for example torch's C++ ``TCPStore``) still occupy
  the port machine-wide: give each concurrently running job its own ``MASTER_PORT``.

The local interpreter stands in for the image's Python: a command whose first word is ``python``,
``python3`` or ``python3.N`` (no directory) runs with ``sys.executable``, the interpreter the emulator
runs on, so ``command: [python, -c, ...]`` in a ``python:3.11-slim`` container works whatever is on
``PATH``. Any other program is looked up on the emulator's ``PATH``.

Termination messages: each container's ``terminationMessagePath`` is a file of its own here; the
env variable ``GANG_SIM_TERMINATION_MESSAGE_PATH`` names it and env values / command words holding
the path are rewritten to it (:mod:`.termination_messages`).

stdout and stderr (merged) are appended line by line to the pod log store (``kubectl logs``). When
the kubelet stops a pod (its deletion, its node's shutdown) the processes get SIGTERM, then SIGKILL
when the grace period the kubelet gives is over (simulated seconds on the control plane's clock; a
shortened grace period brings SIGKILL forward). Upstream's floor of 2 s per container
(``minimumGracePeriodInSeconds``, ``pkg/kubelet/kuberuntime``) is not modelled: a grace period of 0
kills at once.

Not supported here: ``restartPolicy`` restarts (an exited process ends the pod), ``envFrom``,
``secretKeyRef``/``resourceFieldRef`` env sources, volumes, probes, and resource limits (processes
run unconfined as the emulator's user).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gang_sim.controllers.kubelet import container_env, termination_messages
from gang_sim.controllers.kubelet.resolver import Resolver
from gang_sim.world import images
from gang_sim.world.clock import Clock

Obj = dict[str, Any]
_PYTHON = re.compile(r"^python(3(\.[0-9]+)?)?$")


def local_command(command: list[str]) -> list[str]:
    """``command`` with a bare ``python``/``python3``/``python3.N`` replaced by ``sys.executable``."""
    if command and _PYTHON.match(command[0]):
        return [sys.executable, *command[1:]]
    return command


def pod_hostname(pod: Obj) -> str:
    spec = pod.get("spec") or {}
    return str(spec.get("hostname") or pod["metadata"]["name"])[:63]


@dataclass
class PodProcesses:
    namespace: str
    name: str
    grace_seconds: float
    processes: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    exit_codes: dict[str, int] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    started: bool = False
    kill_at: float | None = None
    """When stopping (the clock's seconds), what still runs gets SIGKILL; set by the stop, or earlier
    by :meth:`ProcessRuntime.shorten`."""
    kill_moved: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when :attr:`kill_at` moved earlier (:meth:`ProcessRuntime.shorten`)."""


def _exit_code(returncode: int | None) -> int:
    """The container exit code of a process: ``128 + N`` when signal N ended it (as a shell and the
    container runtime report it: 143 for SIGTERM, 137 for SIGKILL)."""
    if returncode is None:
        return 137
    return 128 - returncode if returncode < 0 else returncode


OUTPUT_CHUNK = 64 * 1024


async def output_lines(stream: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The lines of ``stream`` (each with its ``\\n``; the last one may lack it), however long: a
    container runtime splits a long line into 16 KiB pieces and the kubelet joins them when the log
    is read (CRI log format, ``P``/``F`` tags; ``pkg/kubelet/kuberuntime/logs/logs.go``), so a log
    line has no length limit - unlike ``StreamReader.readline``, which fails past its 64 KiB limit."""
    pending = b""
    while chunk := await stream.read(OUTPUT_CHUNK):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if pending:
        yield pending


class ProcessRuntime:
    def __init__(self, store: Any, clock: Clock, patterns: tuple[str, ...], wake: Callable[[], None]) -> None:
        self.store = store
        self.clock = clock
        self.patterns = tuple(patterns)
        """Image globs whose containers run here (:mod:`...world.images`)."""
        self.wake = wake
        self.pods: dict[str, PodProcesses] = {}
        self.stopping: dict[str, PodProcesses] = {}
        """Pods whose processes were told to stop and are within their grace period."""
        self.directory = Path(tempfile.mkdtemp(prefix="gang-sim-runtime-"))
        self._resolver: Resolver | None = None
        self._hosts: tuple[list[Obj], list[Obj], dict[str, str]] = ([], [], {})

    def handles(self, pod: Obj) -> bool:
        containers = (pod.get("spec") or {}).get("containers") or []
        return bool(containers) and all(
            images.matches(str(container.get("image") or ""), self.patterns) for container in containers
        )

    def update_hosts(self, pods: list[Obj], services: list[Obj], pod_ips: dict[str, str]) -> None:
        """Remember the cluster's names; rewrite the shim files once a local pod has started."""
        self._hosts = (pods, services, pod_ips)
        if self._resolver is not None:
            self._resolver.update(pods, services, pod_ips)

    @property
    def resolver(self) -> Resolver:
        """The name-resolution shims, built (the native one compiled) when the first local pod starts:
        a cluster whose pods are all simulated pays nothing for them."""
        if self._resolver is None:
            self._resolver = Resolver(self.directory)
            self._resolver.update(*self._hosts)
        return self._resolver

    def exit_codes(self, uid: str) -> dict[str, int] | None:
        """Exit code per container once every container has exited, else None."""
        running = self.pods.get(uid)
        if running is None or not running.started or len(running.exit_codes) < len(running.processes):
            return None
        return dict(running.exit_codes)

    def environments(self, pod: Obj, pod_ip: str) -> dict[str, dict[str, str]]:
        """Each container's process environment (module docstring), resolved now from the Store;
        raises ``container_env.ContainerConfigError`` (retried by the kubelet) or ``ValueError``."""
        namespace = pod["metadata"]["namespace"]
        result: dict[str, dict[str, str]] = {}
        for container in (pod.get("spec") or {}).get("containers") or []:
            env = {key: os.environ[key] for key in ("PATH", "HOME", "LANG", "TMPDIR") if key in os.environ}
            env.update(container_env.container_environment(pod, container, pod_ip, self._config_map))
            preload = env.get("LD_PRELOAD", "")
            env.update(self.resolver.environment(namespace, env.get("PYTHONPATH", "")))
            if preload and "LD_PRELOAD" in env:
                env["LD_PRELOAD"] = f"{env['LD_PRELOAD']}:{preload}"
            env.update({"HOSTNAME": pod_hostname(pod), "GANG_SIM_POD_IP": pod_ip})
            file = self.termination_file(pod["metadata"]["uid"], container["name"])
            result[container["name"]] = termination_messages.rewrite_env(env, container, file)
        return result

    def termination_file(self, uid: str, container: str) -> Path:
        return termination_messages.termination_file(self.directory, uid, container)

    def termination_text(self, uid: str, container: str) -> str | None:
        """What the container wrote to its termination file (last 4096 bytes), None if absent."""
        return termination_messages.read_tail(self.termination_file(uid, container))

    def _config_map(self, namespace: str, name: str) -> Obj | None:
        return container_env.config_map_in(self.store, namespace, name)

    async def start(self, pod: Obj, environments: dict[str, dict[str, str]]) -> None:
        """Start every container of ``pod`` with its environment from :meth:`environments` (resolved
        by the kubelet when it decided to start the pod); raises ValueError/OSError when one cannot
        start."""
        metadata, spec = pod["metadata"], pod.get("spec") or {}
        running = PodProcesses(
            metadata["namespace"], metadata["name"], float(spec.get("terminationGracePeriodSeconds", 30))
        )
        self.pods[metadata["uid"]] = running
        for container in spec.get("containers") or []:
            command = list(container.get("command") or []) + list(container.get("args") or [])
            if not command:
                raise ValueError(
                    f"container {container['name']!r} has no command: the local-process runtime has no image entrypoint"
                )
            env = environments[container["name"]]
            file = self.termination_file(metadata["uid"], container["name"])
            file.parent.mkdir(parents=True, exist_ok=True)
            file.touch()  # the kubelet creates the (empty) file before the container starts
            command = termination_messages.rewrite_command(command, container, file)
            workdir = container.get("workingDir") or tempfile.mkdtemp(prefix=f"gang-sim-{metadata['name']}-")
            process = await asyncio.create_subprocess_exec(
                *local_command(command),
                cwd=workdir,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
            running.processes[container["name"]] = process
            running.tasks.append(asyncio.create_task(self._collect(running, container["name"], process)))
        running.started = True

    async def _collect(self, running: PodProcesses, container: str, process: asyncio.subprocess.Process) -> None:
        logs = getattr(self.store, "logs", None)
        assert process.stdout is not None
        async for line in output_lines(process.stdout):
            if logs is not None:
                logs.append(running.namespace, running.name, container, line.decode(errors="replace"))
        running.exit_codes[container] = _exit_code(await process.wait())
        if logs is not None:
            logs.close(running.namespace, running.name, container)
        self.wake()

    async def kill(self, uid: str) -> None:
        """SIGTERM every process of the pod, SIGKILL what is left after the grace period; forget its
        termination files."""
        await self.stop(uid)
        shutil.rmtree(self.directory / "termination" / uid, ignore_errors=True)

    async def stop(self, uid: str, grace_seconds: float | None = None) -> dict[str, int]:
        """SIGTERM every process of the pod, SIGKILL what is left after ``grace_seconds`` (default the
        pod's ``terminationGracePeriodSeconds``; simulated seconds, :meth:`shorten` may bring it
        forward); the exit code of each container."""
        running = self.pods.pop(uid, None)
        if running is None:
            return {}
        self.stopping[uid] = running
        codes = await self._stop(running, grace_seconds)
        self.stopping.pop(uid, None)  # a cancelled stop stays there: close() kills what it left running
        return codes

    def shorten(self, uid: str, grace_seconds: float) -> None:
        """A pod being stopped gets SIGKILL at most ``grace_seconds`` from now: its grace period was
        shortened (the kubelet's pod workers only ever shorten it, ``calculateEffectiveGracePeriod``
        in ``pkg/kubelet/pod_workers.go``)."""
        running = self.stopping.get(uid) or self.pods.get(uid)  # a stop not begun yet keeps it too
        if running is None:
            return
        kill_at = self.clock.now() + max(0.0, grace_seconds)
        if running.kill_at is None or kill_at < running.kill_at:
            running.kill_at = kill_at
            running.kill_moved.set()

    async def _until_kill_time(self, running: PodProcesses, waiting: asyncio.Future[Any]) -> None:
        """Until every process exited or :attr:`PodProcesses.kill_at` came (moved by :meth:`shorten`)."""
        while not waiting.done() and running.kill_at is not None:
            timer = asyncio.ensure_future(self.clock.sleep(running.kill_at - self.clock.now()))
            moved = asyncio.ensure_future(running.kill_moved.wait())
            done, _ = await asyncio.wait({waiting, timer, moved}, return_when=asyncio.FIRST_COMPLETED)
            timer.cancel()
            moved.cancel()
            if timer in done:
                return
            running.kill_moved.clear()

    async def _stop(self, running: PodProcesses, grace_seconds: float | None) -> dict[str, int]:
        grace = running.grace_seconds if grace_seconds is None else grace_seconds
        alive = [process for process in running.processes.values() if process.returncode is None]
        for process in alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        if alive:
            waiting: asyncio.Future[Any] = asyncio.gather(*(process.wait() for process in alive))
            kill_at = self.clock.now() + grace
            running.kill_at = kill_at if running.kill_at is None else min(kill_at, running.kill_at)
            try:
                await self._until_kill_time(running, waiting)
            except asyncio.CancelledError:
                waiting.cancel()  # the runtime is closing: close() kills what still runs
                raise
            for process in alive:
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
            await waiting
        for task in running.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return {name: _exit_code(process.returncode) for name, process in running.processes.items()}

    async def close(self) -> None:
        """Stop every process at once: those running and those within a grace period (a stop that
        the closing loop would otherwise abandon, leaving its processes running)."""
        for running in list(self.stopping.values()):
            for process in running.processes.values():
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    await process.wait()
        for uid in list(self.pods):
            running = self.pods[uid]
            running.grace_seconds = 0
            await self.kill(uid)
        shutil.rmtree(self.directory, ignore_errors=True)

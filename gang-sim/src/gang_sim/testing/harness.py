"""Run an :class:`~gang_sim.apiserver.server.Emulator` in a background thread (tests, demo).

The emulator gets its own event loop in a daemon thread, so synchronous code (the sync client,
kubectl subprocesses, pytest) and other event loops can talk to it over real sockets::

    with EmulatorHarness() as cluster:
        subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig_path), "get", "pods"])
        cluster.run(lambda: cluster.store.list("v1/pods"))     # on the server loop, thread-safe
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from gang_sim.apiserver.http.auth import Rule
from gang_sim.apiserver.server import Emulator
from gang_sim.apiserver.store import Store

T = TypeVar("T")


class EmulatorHarness:
    """Start/stop an emulator on a free port; ``run`` executes callables on its loop."""

    def __init__(
        self, *, start_timeout: float = 30.0, kubeconfig_path: str | Path | None = None, **emulator_options: Any
    ) -> None:
        self._options = emulator_options
        self._start_timeout = start_timeout
        self._requested_kubeconfig = kubeconfig_path
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.emulator: Emulator | None = None
        self.kubeconfig_path = Path()
        self.url = ""

    def __enter__(self) -> EmulatorHarness:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="gang-sim", daemon=True)
        self._thread.start()

        async def build_and_start() -> Emulator:
            emulator = self._build_emulator()
            await emulator.start()
            return emulator

        try:
            self.emulator = asyncio.run_coroutine_threadsafe(build_and_start(), loop).result(self._start_timeout)
        except BaseException:
            self.stop()  # do not leave the loop thread behind
            raise
        self.url = self.emulator.url
        self.kubeconfig_path = self.emulator.write_kubeconfig(self._requested_kubeconfig)

    def _build_emulator(self) -> Emulator:
        """The emulator to start, built on the server loop (subclasses attach more to it here)."""
        return Emulator(**self._options)

    @property
    def store(self) -> Store:
        if self.emulator is None:
            raise RuntimeError("the harness is not started")
        return self.emulator.store

    @property
    def token(self) -> str:
        if self.emulator is None:
            raise RuntimeError("the harness is not started")
        return self.emulator.admin_token

    def run(self, function: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Call ``function`` on the server loop and return its result (awaited if it is awaitable)."""
        if self._loop is None:
            raise RuntimeError("the harness is not started")

        async def call() -> Any:
            result = function()
            if inspect.isawaitable(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout)

    def add_user(self, user: str, rules: Iterable[Rule]) -> tuple[str, Path]:
        """Register a user; returns its token and a kubeconfig file for it."""
        emulator = self.emulator
        if emulator is None:
            raise RuntimeError("the harness is not started")
        token: str = self.run(lambda: emulator.add_user(user, rules))
        return token, emulator.write_kubeconfig(token=token)

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
        """Stop the emulator and its loop thread (idempotent)."""
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

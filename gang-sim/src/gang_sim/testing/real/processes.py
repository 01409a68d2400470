"""The control plane's processes: started with their logs in files, checked for health, stopped by PID.

Every component runs in its own process group, so a stop reaches the children it may start. A stop
sends SIGTERM and, after a grace period, SIGKILL - only to processes this module started. A component
that exits before it is healthy fails the start with the tail of its log, which names the flag or
file at fault (kube-apiserver and Kueue log their configuration errors before exiting).
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_LOG_TAIL_LINES = 30
_HEALTH_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class Launch:
    """A component to start: its command line, the environment it needs beyond ours, the address its
    clients use (``url``, empty when it has none) and the URL that answers 200 once it serves
    (``health_url``; ``None``: a running process is all there is to check)."""

    name: str
    command: Sequence[str]
    url: str = ""
    health_url: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)


class ComponentFailed(RuntimeError):
    """A component exited or never became healthy; the message carries its log's last lines."""


@dataclass
class Component:
    """One process of the control plane, its command and the file its output goes to."""

    name: str
    command: Sequence[str]
    log_path: Path
    environment: Mapping[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        environment = {**os.environ, **self.environment}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                list(self.command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,
            )

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def failure(self, what: str) -> ComponentFailed:
        return ComponentFailed(f"{self.name} {what}; the last lines of {self.log_path}:\n{self.log_tail()}")

    def wait_healthy(self, url: str, context: ssl.SSLContext | None, *, timeout: float) -> None:
        """Poll ``url`` until it answers 200; fail at once if the process exits meanwhile."""
        deadline = time.monotonic() + timeout
        last_error = "no answer yet"
        while True:
            if not self.is_running():
                raise self.failure("exited during start")
            try:
                with urllib.request.urlopen(url, timeout=5, context=context) as response:
                    if response.status == 200:
                        return
                    last_error = f"HTTP {response.status}"
            except urllib.error.HTTPError as error:
                last_error = f"HTTP {error.code}"
            except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError) as error:
                last_error = str(error)
            if time.monotonic() >= deadline:
                raise self.failure(f"was not healthy at {url} after {timeout:.0f} s ({last_error})")
            time.sleep(_HEALTH_POLL_SECONDS)

    def stop(self, grace_seconds: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_seconds``; idempotent."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(grace_seconds)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            process.wait(grace_seconds)

    def kill(self) -> None:
        """SIGKILL the process group at once, as a crash or an OOM kill ends it (idempotent)."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        process.wait(30)

    def restart(self, down_seconds: float, health_url: str, context: ssl.SSLContext | None, *, timeout: float) -> None:
        """:meth:`kill`, ``down_seconds`` later start the same command again (its log appended), and
        return once ``health_url`` answers 200."""
        self.kill()
        time.sleep(down_seconds)
        self.start()
        self.wait_healthy(health_url, context, timeout=timeout)

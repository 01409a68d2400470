"""``gang-sim serve`` in a subprocess: the emulator :class:`~.harness.ClusterHarness` runs with
``served=True``, for callers that need the server out of their own process (its own interpreter and
GIL beside a load test, or the same command a user runs).

The process is the leader of a new session (``start_new_session``), so stopping it never touches
the caller's process group; its output goes to a log file. It is ready once it prints ``ready:
<url>`` (:mod:`gang_sim.cli`), which it does after writing the kubeconfig. Stopping sends SIGTERM
(``gang-sim serve`` then closes its watches and its local processes and exits 0), SIGKILL after a
timeout. The ``/_sim/`` control endpoints (:mod:`gang_sim.controllers.attach`) are reached over the
server's HTTPS, trusting the CA of the kubeconfig it wrote.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import IO, Any

import yaml

from gang_sim.testing.eventually import eventually

READY = "ready: "
"""What ``gang-sim serve`` prints, followed by its URL, once it serves."""
LOG_TAIL_LINES = 40


class ServedEmulator:
    """One ``gang-sim serve`` process: ``arguments`` are those after ``serve`` (``--kubeconfig-out`` added)."""

    def __init__(self, arguments: list[str], *, kubeconfig_path: Path, log_path: Path) -> None:
        self.command = [sys.executable, "-m", "gang_sim.cli", "serve", "--kubeconfig-out", str(kubeconfig_path)]
        self.command += arguments
        self.kubeconfig_path = kubeconfig_path
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._tls: ssl.SSLContext | None = None
        self.url = ""

    def start(self, timeout: float) -> str:
        """Start the process and wait until it serves; its URL. AssertionError (with its log) if it exits."""
        self._log_file = self.log_path.open("wb")
        self._process = subprocess.Popen(
            self.command, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        eventually(lambda: READY in self.log() or not self.running(), timeout=timeout, what="gang-sim serve ready")
        if not self.running():
            raise AssertionError(f"gang-sim serve exited:\n{self.describe()}")
        self.url = next(line for line in self.log().splitlines() if line.startswith(READY))[len(READY) :].strip()
        return self.url

    def log(self) -> str:
        """Everything the process wrote so far ("" before it starts or once its log is gone)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def describe(self) -> str:
        """The process's state and the tail of its log, for failure messages (also once stopped)."""
        process = self._process
        state = "not started" if process is None else "running" if process.poll() is None else "exited"
        if process is not None and process.returncode is not None:
            state += f" with {process.returncode}"
        lines = "\n".join(line[:600] for line in self.log().splitlines()[-LOG_TAIL_LINES:])
        pid = "" if process is None else f"pid {process.pid}, "
        return f"--- gang-sim serve ({pid}{state}), {self.log_path}:\n{lines}"

    def token(self) -> str:
        """The admin's bearer token, as the kubeconfig the process wrote holds it."""
        return str(yaml.safe_load(self.kubeconfig_path.read_text())["users"][0]["user"]["token"])

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """``method`` on the control endpoint ``path`` (e.g. ``/_sim/clock``) with a JSON body; its JSON answer."""
        if self._tls is None:
            cluster = yaml.safe_load(self.kubeconfig_path.read_text())["clusters"][0]["cluster"]
            authority = base64.b64decode(cluster["certificate-authority-data"]).decode()
            self._tls = ssl.create_default_context(cadata=authority)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, context=self._tls, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
        return answer

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds (idempotent)."""
        process = self._process
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

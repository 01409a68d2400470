"""Processes of the real-Airflow suite: start one in its own session, wait for it, stop all of it.

Everything the suite starts binds 127.0.0.1 on a free port (a port
clash leaves a half-started Airflow that still looks ready). Each process is started as the leader
of a new session, and stopped by that session id only: Airflow moves task runners into process
groups of their own (``os.setpgid`` in the task SDK supervisor, apache/airflow#65505), so the
process group alone would miss them, but nothing in Airflow leaves the session. Nothing else on
the machine is touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

BIN = Path(sys.executable).parent
"""The venv's ``bin``: ``airflow``, ``gang-sim`` and ``kubectl`` live there."""

TAIL_LINES = 40
"""Lines of each log shown when something fails."""


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def session_members(session: int) -> list[int]:
    """Process ids of the live processes of ``session`` (Linux ``/proc``; field 6 of ``stat``)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        # ``pid (comm) state ppid pgrp session ...``; comm may contain spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == session and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def tail(text: str, lines: int = TAIL_LINES, width: int = 600) -> str:
    """The last ``lines`` lines of ``text``, each cut to ``width`` characters."""
    return "\n".join(line[:width] for line in text.splitlines()[-lines:])


@dataclass
class Started:
    """A process started as the leader of a new session, its output going to ``log_path``."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]

    def log(self) -> str:
        """Everything the process wrote so far ("" once the directory is removed)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def running(self) -> bool:
        return self.process.poll() is None

    def describe(self) -> str:
        """Name, pid and state, then the tail of the log: for failure messages."""
        state = "running" if self.running() else f"exited with {self.process.returncode}"
        return f"--- {self.name} (pid {self.process.pid}, {state}), {self.log_path}:\n{tail(self.log())}"

    def signal_session(self, number: signal.Signals) -> None:
        """Send ``number`` to every process of the session (the leader first)."""
        for pid in sorted(session_members(self.process.pid), key=lambda pid: pid != self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)

    def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the leader to exit; True if it did."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the whole session at once (a crash: nothing gets to clean up). Closes this side's
        log file (the processes had their own descriptors); :meth:`log` still reads it."""
        self.signal_session(signal.SIGKILL)
        self.wait_exit(30)
        self.log_file.close()

    def terminate(self) -> None:
        """SIGTERM the leader (if it still runs) without waiting: a graceful stop, as an orchestrator does."""
        if self.running():
            os.kill(self.process.pid, signal.SIGTERM)

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM the leader, SIGKILL the session once the leader exited or ``grace`` seconds passed.

        Idempotent. What is still in the session after the leader exits (a task runner, a log
        server) is killed too, so nothing started here outlives the suite.
        """
        self.terminate()
        self.wait_exit(grace)
        deadline = time.monotonic() + 10
        while session_members(self.process.pid) and time.monotonic() < deadline:
            self.signal_session(signal.SIGKILL)
            time.sleep(0.2)
        self.wait_exit(10)
        self.log_file.close()


def start(name: str, command: list[str], log_path: Path, env: Mapping[str, str] | None = None) -> Started:
    """Start ``command`` in a new session with stdout and stderr going to ``log_path``."""
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        command,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=dict(env or os.environ),
        start_new_session=True,
    )
    return Started(name, process, log_path, log_file)


@contextlib.contextmanager
def diagnosed_by(diagnose: Callable[[], str]) -> Iterator[None]:
    """An ``AssertionError`` raised inside (a wait timing out) is raised again with ``diagnose()``
    appended: the tails of the logs, for waits before a test has its ``Setup`` (in a test,
    ``conftest.py`` adds them to the report)."""
    try:
        yield
    except AssertionError as error:
        raise AssertionError(f"{error}\n{diagnose()}") from error

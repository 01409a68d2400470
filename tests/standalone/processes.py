"""Processes for the opt-in real-Airflow tests: ``gang-sim serve`` clusters and ``airflow standalone``.

Everything binds 127.0.0.1 on free ports (airflow-3.3-notes section 2a: a port clash leaves a
half-started Airflow that still prints its ready banner). Each process is started in its own
session and stopped by its process group id only, so nothing else on the machine is touched.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

BIN = Path(sys.executable).parent
"""The venv's ``bin``: ``airflow``, ``gang-sim`` and ``kubectl`` live there."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Started:
    """A process started in its own session, its output going to ``log_path``."""

    process: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM the process group, SIGKILL what is still there after ``grace`` seconds."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        # Orphans of the group (standalone's components) get the same treatment.
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            time.sleep(1)
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.log_file.close()


def start(command: list[str], log_path: Path, env: Mapping[str, str] | None = None) -> Started:
    log_file = log_path.open("wb")
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=dict(env or os.environ),
                               start_new_session=True)
    return Started(process, log_path, log_file)


def wait_for(condition: Any, timeout: float, what: str, interval: float = 1.0) -> Any:
    """Poll ``condition()`` until it returns a truthy value; return it."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


@dataclass
class Cluster:
    """``gang-sim serve --scenario`` in a subprocess, read with kubectl through its kubeconfig."""

    started: Started
    kubeconfig: Path

    def connection_json(self) -> str:
        return json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(self.kubeconfig)}})

    def kubectl(self, *arguments: str) -> str:
        result = subprocess.run([str(BIN / "kubectl"), "--kubeconfig", str(self.kubeconfig), *arguments],
                                capture_output=True, text=True, timeout=60, check=True)
        return result.stdout

    def names(self, kinds: str, label_selector: str) -> list[str]:
        """``kind/name`` of every object of ``kinds`` (comma separated) matching the selector."""
        return self.kubectl("get", kinds, "-n", "default", "-l", label_selector, "-o", "name").split()


def start_cluster(directory: Path, scenario: str, time_scale: float) -> Cluster:
    kubeconfig = directory / f"kubeconfig-{scenario}"
    started = start([str(BIN / "gang-sim"), "serve", "--scenario", scenario, "--time-scale", str(time_scale),
                     "--kubeconfig-out", str(kubeconfig)], directory / f"gang-sim-{scenario}.log")
    wait_for(lambda: "ready:" in started.log() or started.process.poll() is not None, 60, "gang-sim ready", 0.2)
    if started.process.poll() is not None:
        raise RuntimeError(f"gang-sim exited: {started.log()}")
    return Cluster(started, kubeconfig)


@dataclass
class Airflow:
    """``airflow standalone`` (scheduler, dag-processor, api-server, triggerer) and a REST client."""

    started: Started
    home: Path
    base_url: str
    token: str = field(default="", repr=False)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
        return json.loads(text) if text else None

    def login(self) -> None:
        passwords = json.loads((self.home / "simple_auth_manager_passwords.json.generated").read_text())
        answer = self.request("POST", "/auth/token", {"username": "admin", "password": passwords["admin"]})
        self.token = answer["access_token"]

    def healthy(self) -> bool:
        try:
            health = self.request("GET", "/api/v2/monitor/health")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False
        parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
        return all((health.get(part) or {}).get("status") == "healthy" for part in parts)

    def trigger_log(self, run_id: str = "*", attempt: int | str = "*") -> str:
        """The triggerer-side task logs (``attempt=N.log.trigger.<job>.log``) written so far."""
        pattern = f"run_id={run_id}/task_id=*/attempt={attempt}.log.trigger.*"
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.home.rglob(pattern)))

    def task_log(self, run_id: str = "*") -> str:
        """The worker-side task logs (``attempt=N.log``) written so far."""
        pattern = f"run_id={run_id}/task_id=*/attempt=*.log"
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.home.rglob(pattern)))


def start_airflow(directory: Path, dags: Path, connections: Mapping[str, str]) -> Airflow:
    home = directory / "home"
    home.mkdir()
    api_port = free_port()
    env = dict(os.environ)
    env.pop("AIRFLOW_CONFIG", None)
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
        # One secret for every component: left unset, components that start before standalone has
        # written airflow.cfg generate their own, and workers then fail with "Invalid auth token".
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
        **{f"AIRFLOW_CONN_{conn_id.upper()}": value for conn_id, value in connections.items()},
    })
    started = start([str(BIN / "airflow"), "standalone"], directory / "standalone.log", env)
    return Airflow(started, home, f"http://127.0.0.1:{api_port}")

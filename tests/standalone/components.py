"""Airflow's components as separate processes, and the suite's ways of looking at them.

What ``airflow standalone`` runs (scheduler, dag-processor, triggerer, api-server; LocalExecutor on
sqlite; SimpleAuthManager), started one by one so that a test can stop one component and start
another (a second triggerer). :func:`start_airflow` migrates the database, then starts each
component as ``airflow <component>`` in its own session (:mod:`.processes`), with:

- an environment of its own: the caller's ``AIRFLOW*`` variables are dropped (pytest's
  ``AIRFLOW__CORE__UNIT_TEST_MODE`` would load ``unit_tests.cfg``), everything the suite relies on
  is set explicitly, ``config`` overrides come last;
- every listening socket on 127.0.0.1: the api-server on a free port, and the scheduler's and
  triggerer's log servers (which bind all interfaces) not started (``--skip-serve-logs``: all
  components share one ``AIRFLOW_HOME``, so task logs are read from disk);
- a known admin password (the SimpleAuthManager password file is written first).

:meth:`Airflow.describe` gives the tail of every component's log (stopped ones too) for failure
messages.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gang_sim.testing.eventually import eventually
from tests.child_processes import REPOSITORY
from tests.standalone.processes import BIN, Started, diagnosed_by, free_port, start

COMPONENTS = ("scheduler", "dag-processor", "triggerer", "api-server")
"""Started in this order (as ``airflow standalone`` does), stopped in the reverse one."""

SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
OPTIONS = {"scheduler": ["--skip-serve-logs"], "triggerer": ["--skip-serve-logs"]}


@dataclass(frozen=True)
class TriggerRow:
    """A task instance's row of the ``trigger`` table: which triggerer job runs its trigger.

    Read from the database: the REST API's task instance has ``trigger`` without ``triggerer_id``,
    and its ``triggerer_job`` field is, in 3.3.2, the job that *queued* the task
    (``Field(alias="triggerer_job")`` on ``queued_by_job``)."""

    run_id: str
    try_number: int
    state: str | None
    trigger_id: int | None
    classpath: str | None
    triggerer_id: int | None


@dataclass
class Airflow:
    """A running Airflow: its components, a REST client, its logs and its database (read only)."""

    home: Path
    directory: Path
    base_url: str
    env: dict[str, str] = field(repr=False)
    password: str = field(repr=False)
    components: dict[str, Started] = field(default_factory=dict)
    """The current process of each component."""
    started: list[Started] = field(default_factory=list)
    """Every process started, in order (stopped ones too)."""
    token: str = field(default="", repr=False)

    def start_component(self, component: str) -> Started:
        """Start ``airflow <component>``; the n-th process of a component logs to ``<component>-<n>.log``."""
        count = sum(1 for process in self.started if process.name.rstrip("-0123456789") == component)
        name = component if count == 0 else f"{component}-{count + 1}"
        process = start(
            name,
            [str(BIN / "airflow"), component, *OPTIONS.get(component, [])],
            self.directory / f"{name}.log",
            self.env,
        )
        self.components[component] = process
        self.started.append(process)
        return process

    def check_running(self) -> None:
        """Raise ``AssertionError`` with the logs if a current component has exited."""
        exited = [process.name for process in self.components.values() if not process.running()]
        assert not exited, f"Airflow component(s) exited: {', '.join(exited)}\n{self.describe()}"

    def describe(self) -> str:
        """The tail of every component's log, for failure messages."""
        return "\n".join(process.describe() for process in self.started)

    def stop(self) -> None:
        """Stop every process started: SIGTERM to all (the last started first), then wait for each."""
        for process in reversed(self.started):
            process.terminate()
        for process in reversed(self.started):
            process.stop()

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Call the REST API (as the logged-in admin once :meth:`login` ran); return the JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
        return json.loads(text) if text else None

    def login(self) -> None:
        answer = self.request("POST", "/auth/token", {"username": "admin", "password": self.password})
        self.token = answer["access_token"]

    def healthy(self) -> bool:
        """Every component process runs (else ``AssertionError``) and ``/api/v2/monitor/health`` says
        the database, scheduler, triggerer and dag-processor are healthy."""
        self.check_running()
        try:
            health = self.request("GET", "/api/v2/monitor/health")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False
        parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
        return all((health.get(part) or {}).get("status") == "healthy" for part in parts)

    def dag_known(self, dag_id: str) -> bool:
        try:
            self.request("GET", f"/api/v2/dags/{dag_id}")
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return False
            raise
        return True

    def wait_ready(self, dag_ids: tuple[str, ...]) -> None:
        """Wait (generously: a loaded 2-core machine) until healthy, log in, wait until ``dag_ids`` are parsed."""
        with diagnosed_by(self.describe):
            eventually(self.healthy, timeout=300, what="healthy Airflow components", interval=2)
        self.login()
        for dag_id in dag_ids:
            with diagnosed_by(self.describe):
                eventually(
                    lambda dag_id=dag_id: self.dag_known(dag_id), timeout=180, what=f"DAG {dag_id} parsed", interval=2
                )

    def triggerer_jobs(self) -> dict[int, dict[str, Any]]:
        """Every ``TriggererJob`` row by id: ``state``, ``latest_heartbeat``, ``end_date`` (``None`` or
        text), from the ``job`` table with a read-only connection: Airflow 3.1's ``/api/v2/jobs`` lists
        running jobs only (``airflow/api_fastapi/core_api/routes/public/job.py``)."""
        uri = f"file:{self.home / 'airflow.db'}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=30)) as connection:
            rows = connection.execute(
                "SELECT id, state, latest_heartbeat, end_date FROM job WHERE job_type = 'TriggererJob'"
            ).fetchall()
        return {int(id_): {"state": state, "latest_heartbeat": beat, "end_date": end} for id_, state, beat, end in rows}

    def trigger_rows(self, dag_id: str) -> list[TriggerRow]:
        """The ``train`` task instances of ``dag_id`` with their trigger rows (a read-only connection)."""
        uri = f"file:{self.home / 'airflow.db'}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=30)) as connection:
            rows = connection.execute(
                "SELECT ti.run_id, ti.try_number, ti.state, t.id, t.classpath, t.triggerer_id "
                'FROM task_instance AS ti LEFT JOIN "trigger" AS t ON ti.trigger_id = t.id '
                "WHERE ti.dag_id = ? AND ti.task_id = 'train' ORDER BY ti.run_id",
                (dag_id,),
            ).fetchall()
        return [TriggerRow(*row) for row in rows]

    def trigger_log(self, run_id: str = "*", attempt: int | str = "*", triggerer: int | str = "*") -> str:
        """The triggerer-side task logs (``attempt=N.log.trigger.<triggerer job id>.log``) written so far."""
        pattern = f"run_id={run_id}/task_id=*/attempt={attempt}.log.trigger.{triggerer}.log"
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.home.rglob(pattern)))

    def component_log(self, component: str) -> str:
        """What every process of ``component`` (``api-server``, ``scheduler``...) has logged so far."""
        return "\n".join(
            (self.directory / f"{process.name}.log").read_text(errors="replace")
            for process in self.started
            if process.name.rstrip("-0123456789") == component
        )

    def task_log(self, run_id: str = "*") -> str:
        """The worker-side task logs (``attempt=N.log``) written so far."""
        pattern = f"run_id={run_id}/task_id=*/attempt=*.log"
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.home.rglob(pattern)))


def component_env(
    home: Path, dags: Path, api_port: int, connections: Mapping[str, str], config: Mapping[str, str]
) -> dict[str, str]:
    """The environment of every component (see the module docstring)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AIRFLOW", "_AIRFLOW"))}
    env.update(
        {
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            # The repository first, as for every child process (tests.child_processes): a test may
            # configure a class of its own, such as tests.standalone.limited_auth's auth manager.
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY), env.get("PYTHONPATH")])),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(api_port),
            "AIRFLOW__API__WORKERS": "1",
            # Workers derive the execution API URL from it (default http://localhost:8080/execution/).
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
            # One secret for every component: left unset, each would generate its own, and workers then
            # fail with "Invalid auth token".
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            **{f"AIRFLOW_CONN_{conn_id.upper()}": value for conn_id, value in connections.items()},
            **config,
        }
    )
    return env


def start_airflow(
    directory: Path, dags: Path, connections: Mapping[str, str], config: Mapping[str, str] | None = None
) -> Airflow:
    """Migrate a new database in ``directory/home``, then start the components (not waiting for them:
    :meth:`Airflow.wait_ready`). ``config``: extra ``AIRFLOW__SECTION__KEY`` variables. On failure
    nothing is left running."""
    home = directory / "home"
    home.mkdir()
    api_port = free_port()
    password = secrets.token_urlsafe(16)
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": password}))
    env = component_env(home, dags, api_port, connections, config or {})
    airflow = Airflow(home, directory, f"http://127.0.0.1:{api_port}", env, password)
    try:
        migrate = start("db migrate", [str(BIN / "airflow"), "db", "migrate"], directory / "db-migrate.log", env)
        airflow.started.append(migrate)
        exited = migrate.wait_exit(300)
        assert exited and migrate.process.returncode == 0, f"airflow db migrate failed\n{migrate.describe()}"
        for component in COMPONENTS:
            airflow.start_component(component)
    except BaseException:
        airflow.stop()
        raise
    return airflow

"""Airflow deployed as the official Helm chart deploys it, as processes on loopback.

What runs (each ``airflow <component>`` in a session of its own, :mod:`tests.standalone.processes`):
two schedulers, two triggerers, one dag-processor, one api-server and two Celery workers
(``airflow celery worker``), on PostgreSQL (the metadata database and Celery's result backend) and
Redis (the Celery broker), :mod:`.services`. Configuration is environment variables only, the way
the chart's pods get it (``AIRFLOW__CORE__EXECUTOR``, ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``,
``AIRFLOW__CELERY__BROKER_URL``, ``AIRFLOW__CELERY__RESULT_BACKEND``, one JWT secret and one API
secret key for every component, ``AIRFLOW__CORE__EXECUTION_API_SERVER_URL`` pointing the workers at
the api-server), on top of :func:`tests.standalone.components.component_env` (the caller's
``AIRFLOW*`` variables dropped, SimpleAuthManager with a known admin password, every listening
socket on 127.0.0.1: no component serves its logs, they share one ``AIRFLOW_HOME`` on disk as a
shared log volume would).

Component names are unique (``scheduler-1``, ``scheduler-2``...); :meth:`Deployment.kill` SIGKILLs
one by its session (the leader's PID and everything it started) and :meth:`Deployment.restart`
starts its replacement under a new name (``scheduler-1`` -> ``scheduler-1b``), as Kubernetes
restarts a pod. Failure detection is sped up as a chart user would tune it for fast failover:
triggerer heartbeat 2 s and health threshold 10 s (a dead triggerer's triggers move after ~10 s),
task instance heartbeat timeout 30 s (a task whose worker died is failed and retried after ~30 s),
scheduler heartbeat threshold 10 s (a dead scheduler's queued tasks are adopted after ~10 s).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.fernet import Fernet

from tests.production.services import Postgres, Redis
from tests.standalone.components import Airflow, component_env
from tests.standalone.processes import BIN, Started, free_port, start

CELERY_CONCURRENCY = 6
"""Task processes per Celery worker (the chart's ``workers.celery.concurrency``... default 16; two
loaded cores here)."""

COMMANDS = {
    "scheduler": ["scheduler", "--skip-serve-logs"],
    "triggerer": ["triggerer", "--skip-serve-logs"],
    "dag-processor": ["dag-processor"],
    "api-server": ["api-server"],
    "worker": ["celery", "worker", "--skip-serve-logs", "--concurrency", str(CELERY_CONCURRENCY)],
}
WORKER_QUEUES = {"worker-1": "default", "worker-2": "default,waiting"}
"""Celery queues per worker: the waiting gangs' queue ``waiting`` only on ``worker-2``, which no kill
touches (``tests/production/burst.py``)."""
REPLICAS = {"scheduler": 2, "triggerer": 2, "dag-processor": 1, "api-server": 1, "worker": 2}
"""The chart's replicas: ``scheduler.replicas: 2``, ``triggerer.replicas: 2``, ``workers.replicas: 2``."""


def production_config(postgres: Postgres, redis: Redis, api_port: int) -> dict[str, str]:
    """The ``AIRFLOW__...`` variables of every component (see the module docstring)."""
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": postgres.url,
        "AIRFLOW__CELERY__BROKER_URL": redis.url,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + postgres.url,
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(CELERY_CONCURRENCY),
        # The broker redelivers an unacknowledged task after this; the scheduler's heartbeat check
        # fails and retries the task of a dead worker long before.
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "21600",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        # A task runner gives up on an execution API call after 5 s by default: a burst of task starts
        # on a loaded api-server takes longer (the chart user raises it, or runs more api-servers).
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
        # ... and retries a refused connection 5 times, about 15 s in all: less than an api-server's
        # restart takes, so a try whose record is written meanwhile fails. 8: about 2 minutes.
        "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "8",
        "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
        "AIRFLOW__CORE__PARALLELISM": "64",
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "256",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "10",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "10",
        # A scheduler killed between queueing tasks and sending them to the broker leaves them queued
        # with no message; the other scheduler adopts them but only this timeout requeues them. It is
        # also the lifetime of a queued task's token (airflow/executors/workloads/base.py): it must
        # exceed the longest wait for a Celery slot in the burst.
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "240",
        # How often that timeout is checked (default 120 s): a task a killed worker had received
        # waits in queued for the timeout plus up to this.
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT_CHECK_INTERVAL": "30",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
        "AIRFLOW__TRIGGERER__CAPACITY": "1000",
    }


@dataclass
class Deployment:
    """The running services and components; :attr:`airflow` is the standalone suite's REST client
    and log reader over the same ``AIRFLOW_HOME``."""

    directory: Path
    postgres: Postgres
    redis: Redis
    airflow: Airflow
    kills: list[str] = field(default_factory=list)
    """What was killed, in order (``scheduler-1``, ``postgres``...)."""

    def start_component(self, name: str) -> Started:
        """Start ``airflow <kind>`` as ``name`` (``<kind>-<n>[b...]``)."""
        kind = name.rsplit("-", 1)[0]
        command = [str(BIN / "airflow"), *COMMANDS[kind]]
        if kind == "worker":
            command += ["--celery-hostname", f"{name}@%h", "--queues", WORKER_QUEUES[name.rstrip("b")]]
        process = start(name, command, self.directory / f"{name}.log", self.airflow.env)
        self.airflow.components[name] = process
        self.airflow.started.append(process)
        return process

    def kill(self, name: str) -> Started:
        """SIGKILL component ``name`` with everything it started; it is no longer expected to run."""
        process = self.airflow.components.pop(name)
        process.kill()
        self.kills.append(name)
        return process

    def restart(self, name: str) -> str:
        """Start the replacement of the killed ``name``; return its name."""
        replacement = f"{name}b"
        self.start_component(replacement)
        return replacement

    def restart_postgres(self) -> None:
        """SIGKILL PostgreSQL and start it again on the same data directory (crash recovery)."""
        self.postgres.kill()
        self.kills.append("postgres")
        self.postgres.start()

    def describe(self) -> str:
        return "\n".join([self.airflow.describe(), self.postgres.describe(), self.redis.describe()])

    def stop(self) -> None:
        self.airflow.stop()
        self.redis.stop()
        self.postgres.stop()


def start_deployment(directory: Path, dags: Path, connections: Mapping[str, str]) -> Deployment:
    """Start PostgreSQL and Redis, migrate the database, start every component (not waiting for them:
    ``deployment.airflow.wait_ready``). On failure nothing is left running."""
    postgres, redis = Postgres(directory), Redis(directory)
    home = directory / "home"
    home.mkdir()
    password = secrets.token_urlsafe(16)
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": password}))
    airflow = Airflow(home, directory, "", {}, password)
    deployment = Deployment(directory, postgres, redis, airflow)
    try:
        postgres.initialize()
        postgres.start()
        redis.start()
        api_port = free_port()
        airflow.base_url = f"http://127.0.0.1:{api_port}"
        airflow.env = component_env(home, dags, api_port, connections, production_config(postgres, redis, api_port))
        migrate = start(
            "db migrate", [str(BIN / "airflow"), "db", "migrate"], directory / "db-migrate.log", airflow.env
        )
        airflow.started.append(migrate)
        exited = migrate.wait_exit(300)
        assert exited and migrate.process.returncode == 0, f"airflow db migrate failed\n{migrate.describe()}"
        for kind in ("scheduler", "dag-processor", "triggerer", "api-server", "worker"):
            for replica in range(1, REPLICAS[kind] + 1):
                deployment.start_component(f"{kind}-{replica}")
    except BaseException:
        deployment.stop()
        raise
    return deployment

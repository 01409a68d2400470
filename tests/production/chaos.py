"""Killing every component once while the burst runs, and restarting what Kubernetes would restart.

:class:`Chaos` watches the burst through the REST API and the emulator's committed changes
(:class:`tests.reliability.emulator_side.Ledger`) and, in this order, each once, with SIGKILL to the
component's session (its PID and everything it started, :meth:`Deployment.kill`):

1. ``scheduler-1``, once a sixth of the gangs (at most 10) are deferred (the other scheduler adopts
   its queued tasks once its heartbeat is stale);
2. ``triggerer-1``, once a third of the gangs (at most 20: the Celery slots bound how many defer at
   once) are deferred (the other triggerer takes them over after
   ``triggerer_health_check_threshold``);
3. ``worker-1`` in the middle of a launch: pod creates are slowed from outside (the emulator answers
   40 % of them 503, retried by the client), and the worker is killed while a
   ``provisioning_request`` gang it launches has some but not all of its members (the task runner's
   PID, ``task_instance.pid``, is in the worker's session); its task's heartbeat then times out and
   the next try adopts the gang;
4. ``api-server-1`` (the execution API of every running task and the REST API);
5. PostgreSQL, started again on its data directory (crash recovery);
6. the cluster's control plane (:meth:`ClusterHarness.restart_control_plane
   <gang_sim.testing.harness.ClusterHarness.restart_control_plane>`): its API server killed - every
   connection and watch of every worker and triggerer cut, connections refused for
   :data:`CLUSTER_DOWN_SECONDS`, then served again from its store with a new watch cache (resumed
   watches get 410 and list again) - and its scheduler, job controller, cluster-autoscaler and Kueue
   started again with empty memory, rebuilt from the store; the nodes and the cloud's machines keep
   running, as through a managed control plane's upgrade or a failover of its leaders.

Each killed Airflow component is started again at once under a new name, as a Deployment's ReplicaSet
would; a component that exits on its own (Airflow's schedulers and triggerers exit when their
database connection breaks) is restarted too and counted in :attr:`Chaos.restarts`.
"""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.reservation import naming
from gang_sim.testing import ClusterHarness
from tests.production.burst import DAG_ID, BurstGang
from tests.production.deployment import Deployment
from tests.reliability.emulator_side import Control, Ledger
from tests.standalone.processes import session_members

SLOW_POD_CREATES = "create/pods:0.4:503,seed:5"
KILL_GAP_SECONDS = 10.0
"""Real time between two kills, so each component's failover is seen on its own."""
LAUNCH_PATIENCE_SECONDS = 180.0
"""How long the worker kill waits for a launch on ``worker-1``; past it, the worker is killed whatever
it runs and :attr:`Chaos.mid_launch` says so."""
CLUSTER_DOWN_SECONDS = 10.0
KILLS = (
    "a scheduler SIGKILLed",
    "a triggerer SIGKILLed",
    "a Celery worker SIGKILLed mid-launch",
    "the api-server SIGKILLed",
    "PostgreSQL SIGKILLed, restarted",
    "the cluster's control plane killed, restarted",
)
"""The kills of the module docstring, in order: their rows in the reliability table."""
FINISHED = ("success", "failed", "upstream_failed", "skipped", "removed")


def task_instances(deployment: Deployment, run_id: str) -> dict[str, dict[str, Any]] | None:
    """Every task instance of the run by task id, or None while the api-server does not answer."""
    try:
        answer = deployment.airflow.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances?limit=1000")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
    return {task["task_id"]: task for task in answer["task_instances"]}


@dataclass
class Chaos:
    """The kill plan of the module docstring, advanced by :meth:`step` (call it every second)."""

    deployment: Deployment
    cluster: ClusterHarness
    ledger: Ledger
    run_id: str
    gangs: tuple[BurstGang, ...]
    restarts: list[str] = field(default_factory=list)
    mid_launch: str = ""
    """The gang whose launch the worker kill interrupted."""
    log: list[str] = field(default_factory=list)
    in_flight: dict[str, set[str]] = field(default_factory=dict)
    """The tasks not yet finished at each kill (by the kill's name in :data:`KILLS`): the ones it could
    have harmed, whose problems count in its row of the reliability table."""
    _plan: list[tuple[str, Callable[[dict[str, dict[str, Any]]], bool]]] = field(default_factory=list)
    _started: float = field(default_factory=time.monotonic)
    _last_kill: float = 0.0

    def __post_init__(self) -> None:
        kills = (
            self._scheduler,
            self._triggerer,
            self._worker_mid_launch,
            self._api_server,
            self._postgres,
            self._cluster_control_plane,
        )
        self._plan = list(zip(KILLS, kills, strict=True))
        self._control = Control(self.cluster)

    @property
    def done(self) -> bool:
        return not self._plan

    def step(self) -> dict[str, dict[str, Any]] | None:
        """Restart exited components, then carry out the next kill if its moment has come; return the
        task instances (None while the api-server is down)."""
        self._restart_exited()
        tasks = task_instances(self.deployment, self.run_id)
        if tasks is None or not self._plan or time.monotonic() - self._last_kill < KILL_GAP_SECONDS:
            return tasks
        name, kill = self._plan[0]
        unfinished = {task_id for task_id, task in tasks.items() if task["state"] not in FINISHED}
        if kill(tasks):
            self._plan.pop(0)
            self.in_flight[name] = unfinished
            self._last_kill = time.monotonic()
        return tasks

    def _note(self, what: str) -> None:
        self.log.append(f"{time.monotonic() - self._started:6.1f} s: {what}")
        print(self.log[-1], flush=True)

    def _restart_exited(self) -> None:
        for name, process in list(self.deployment.airflow.components.items()):
            if not process.running():
                del self.deployment.airflow.components[name]
                replacement = self.deployment.restart(name)
                self.restarts.append(name)
                self._note(f"{name} exited ({process.process.returncode}); started {replacement}")

    def _kill_and_restart(self, name: str) -> None:
        self.deployment.kill(name)
        replacement = self.deployment.restart(name)
        self._note(f"SIGKILL {name}; started {replacement}")

    def _scheduler(self, tasks: dict[str, dict[str, Any]]) -> bool:
        if sum(task["state"] == "deferred" for task in tasks.values()) < min(len(self.gangs) // 6, 10):
            return False
        self._kill_and_restart("scheduler-1")
        return True

    def _triggerer(self, tasks: dict[str, dict[str, Any]]) -> bool:
        if sum(task["state"] == "deferred" for task in tasks.values()) < min(len(self.gangs) // 3, 20):
            return False
        self._kill_and_restart("triggerer-1")
        self._control.set_faults(SLOW_POD_CREATES)
        return True

    def _worker_mid_launch(self, tasks: dict[str, dict[str, Any]]) -> bool:
        worker = self.deployment.airflow.components["worker-1"]
        members = set(session_members(worker.process.pid))
        for gang in self.gangs:
            if gang.mode != "provisioning_request" or not gang.fits or gang.size < 2:
                continue
            task = tasks[gang.task_id]
            if task["state"] != "running" or task.get("pid") not in members:
                continue
            name = naming.gang_name(DAG_ID, gang.task_id, self.run_id, attempt=int(task["try_number"]))
            pods = sum(1 for resource, _, _ in self.ledger.objects_of({name}) if resource == "v1/pods")
            if 0 < pods < gang.size:
                self.mid_launch = f"{name} ({pods} of {gang.size} members created)"
                self._kill_and_restart("worker-1")
                self._note(f"worker-1 was launching {self.mid_launch}")
                self._control.clear_faults()
                return True
        running = [
            task["task_id"] for task in tasks.values() if task["state"] == "running" and task.get("pid") in members
        ]
        if time.monotonic() - self._last_kill > LAUNCH_PATIENCE_SECONDS:
            self.mid_launch = f"no launch seen on worker-1 within {LAUNCH_PATIENCE_SECONDS:.0f} s; it ran {running}"
            self._kill_and_restart("worker-1")
            self._note(self.mid_launch)
            self._control.clear_faults()
            return True
        return False

    def _api_server(self, tasks: dict[str, dict[str, Any]]) -> bool:
        self._kill_and_restart("api-server-1")
        return True

    def _postgres(self, tasks: dict[str, dict[str, Any]]) -> bool:
        self.deployment.restart_postgres()
        self._note("SIGKILL PostgreSQL; started it again")
        return True

    def _cluster_control_plane(self, tasks: dict[str, dict[str, Any]]) -> bool:
        self._note(f"kill the cluster's control plane; down {CLUSTER_DOWN_SECONDS:.0f} s")
        self.cluster.restart_control_plane(CLUSTER_DOWN_SECONDS)
        self.deployment.kills.append("cluster control plane")
        self._note("the cluster's control plane serves again, its controllers started anew")
        return True

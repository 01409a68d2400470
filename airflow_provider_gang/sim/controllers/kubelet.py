"""The simulated kubelet (one for all nodes) with the *simulated* container runtime.

A pod bound to a node goes ``Pending`` (containers ``ContainerCreating``) -> ``Running`` -> and, when
its run time is over, ``Succeeded`` (every container exited 0) or ``Failed``. Timings and exit code
come from pod annotations under the ``sim.gang.dev/`` prefix:

================================  =======  ==========================================================
annotation                        default  meaning (simulated seconds)
================================  =======  ==========================================================
``sim.gang.dev/start-seconds``    ``2``    bound -> Running (image pull and container start)
``sim.gang.dev/run-seconds``      absent   Running -> exit; absent means "runs until deleted"
``sim.gang.dev/exit-code``        ``0``    the exit code of every container when it exits
================================  =======  ==========================================================

``restartPolicy`` is honoured as the kubelet does: ``Never`` ends in a terminal phase, ``OnFailure``
restarts containers that exit non-zero and ``Always`` restarts every exit (``restartCount`` grows).
Each pod gets its own loopback IP (``127.0.0.2`` upwards) as ``status.podIP``.

Deletion: a pod with ``deletionTimestamp`` has its containers stopped (exit code 143, the SIGTERM
status) and is then removed with grace period 0, as the kubelet confirms a graceful delete. Pods bound
to a node that no longer exists are removed too (the pod garbage collector's orphan rule).

Not modelled: probes (a running container is Ready at once), init containers' own lifecycle,
ephemeral containers, resource enforcement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.sim.controllers.base import Controller, Obj, earliest, set_condition, wall_time

ANNOTATION_PREFIX = "sim.gang.dev/"
START_SECONDS = ANNOTATION_PREFIX + "start-seconds"
RUN_SECONDS = ANNOTATION_PREFIX + "run-seconds"
EXIT_CODE = ANNOTATION_PREFIX + "exit-code"
DEFAULT_START_SECONDS = 2.0
TERMINATED_BY_SIGTERM = 143


@dataclass(frozen=True)
class RuntimeSpec:
    """What the simulated runtime does with one pod, read from its annotations."""

    start_seconds: float = DEFAULT_START_SECONDS
    run_seconds: float | None = None
    exit_code: int = 0


def runtime_spec(pod: Obj) -> RuntimeSpec:
    """Parse the ``sim.gang.dev/`` annotations; raise ``ValueError`` naming a malformed one."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}

    def number(key: str) -> float | None:
        if key not in annotations:
            return None
        try:
            value = float(annotations[key])
        except (TypeError, ValueError):
            raise ValueError(f"annotation {key} must be a number of seconds, got {annotations[key]!r}") from None
        if value < 0:
            raise ValueError(f"annotation {key} must not be negative, got {annotations[key]!r}")
        return value

    start = number(START_SECONDS)
    exit_code = annotations.get(EXIT_CODE, "0")
    try:
        code = int(exit_code)
    except (TypeError, ValueError):
        raise ValueError(f"annotation {EXIT_CODE} must be an integer, got {exit_code!r}") from None
    return RuntimeSpec(
        start_seconds=DEFAULT_START_SECONDS if start is None else start, run_seconds=number(RUN_SECONDS), exit_code=code
    )


@dataclass
class PodRun:
    """The kubelet's memory of one pod: when it was admitted and when its containers last started."""

    admitted_at: float
    started_at: float | None = None
    restarts: int = 0


def container_statuses(pod: Obj, state: dict[str, Any], *, ready: bool, restarts: int) -> list[Obj]:
    return [
        {
            "name": container["name"],
            "image": container.get("image", ""),
            "imageID": "",
            "containerID": f"sim://{pod['metadata'].get('uid', '')}-{container['name']}",
            "state": state,
            "ready": ready,
            "started": "running" in state,
            "restartCount": restarts,
        }
        for container in (pod.get("spec") or {}).get("containers") or []
    ]


def pod_conditions(pod: Obj, *, ready: bool, reason: str = "") -> list[Obj]:
    conditions = list((pod.get("status") or {}).get("conditions") or [])
    conditions = set_condition(conditions, "PodReadyToStartContainers", "True", "", "")
    conditions = set_condition(conditions, "Initialized", "True", "", "")
    for kind in ("Ready", "ContainersReady"):
        if ready:
            conditions = set_condition(conditions, kind, "True", "", "")
        else:
            message = (
                "containers with unready status: ["
                + " ".join(container["name"] for container in (pod.get("spec") or {}).get("containers") or [])
                + "]"
            )
            conditions = set_condition(conditions, kind, "False", reason or "ContainersNotReady", message)
    for item in conditions:
        if item.get("status") == "True" and item["type"] != "PodScheduled":
            item.pop("reason", None)
            item.pop("message", None)
    return conditions


class Kubelet(Controller):
    component = "kubelet"
    watches = frozenset({"v1/pods", "v1/nodes"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs: dict[str, PodRun] = {}
        self._next_ip = 2

    def reconcile(self, now: float) -> float | None:
        pods, _ = self.store.list("v1/pods")
        nodes = {node["metadata"]["name"] for node in self.store.list("v1/nodes")[0]}
        wake: float | None = None
        live = set()
        for pod in pods:
            uid = pod["metadata"].get("uid", "")
            live.add(uid)
            node = (pod.get("spec") or {}).get("nodeName")
            if not node:
                continue
            with self.guard(pod):
                if node not in nodes or pod["metadata"].get("deletionTimestamp"):
                    self._stop_and_remove(pod)
                    continue
                wake = earliest(wake, self._step(pod, now))
        for uid in set(self.runs) - live:
            del self.runs[uid]
            self.plane.pod_ips.pop(uid, None)
        return wake

    def _pod_ip(self, uid: str) -> str:
        if uid not in self.plane.pod_ips:
            number = self._next_ip
            self._next_ip += 1
            self.plane.pod_ips[uid] = (
                f"127.0.{number // 254}.{number % 254 + 1}" if number >= 254 else f"127.0.0.{number}"
            )
        return self.plane.pod_ips[uid]

    def _write(self, pod: Obj, status: Obj) -> None:
        metadata = pod["metadata"]
        self.store.patch(
            "v1/pods", metadata["name"], {"status": status}, namespace=metadata["namespace"], subresource="status"
        )

    def _step(self, pod: Obj, now: float) -> float | None:
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase in ("Succeeded", "Failed"):
            return None
        spec = runtime_spec(pod)
        uid = pod["metadata"]["uid"]
        run = self.runs.get(uid)
        if run is None:
            run = self.runs[uid] = PodRun(admitted_at=now)
            ip = self._pod_ip(uid)
            self._write(
                pod,
                {
                    "phase": "Pending",
                    "hostIP": "127.0.0.1",
                    "podIP": ip,
                    "podIPs": [{"ip": ip}],
                    "startTime": wall_time(),
                    "conditions": pod_conditions(pod, ready=False),
                    "containerStatuses": container_statuses(
                        pod, {"waiting": {"reason": "ContainerCreating"}}, ready=False, restarts=0
                    ),
                },
            )
            return now + spec.start_seconds
        if run.started_at is None:
            if now < run.admitted_at + spec.start_seconds:
                return run.admitted_at + spec.start_seconds
            self._start(pod, run, now)
        assert run.started_at is not None
        if spec.run_seconds is None:
            return None
        exits_at = run.started_at + spec.run_seconds
        if now < exits_at:
            return exits_at
        return self._exit(pod, run, spec.exit_code, now)

    def _start(self, pod: Obj, run: PodRun, now: float) -> None:
        run.started_at = now
        self._write(
            pod,
            {
                "phase": "Running",
                "conditions": pod_conditions(pod, ready=True),
                "containerStatuses": container_statuses(
                    pod, {"running": {"startedAt": wall_time()}}, ready=True, restarts=run.restarts
                ),
            },
        )

    def _exit(self, pod: Obj, run: PodRun, exit_code: int, now: float) -> float | None:
        policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
        if policy == "Always" or (policy == "OnFailure" and exit_code != 0):
            run.restarts += 1
            self._start(pod, run, now)
            return None
        terminated = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": (pod.get("status") or {}).get("startTime") or wall_time(),
            "finishedAt": wall_time(),
        }
        self._write(
            pod,
            {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "conditions": pod_conditions(pod, ready=False, reason="PodCompleted"),
                "containerStatuses": container_statuses(
                    pod, {"terminated": terminated}, ready=False, restarts=run.restarts
                ),
            },
        )
        return None

    def _stop_and_remove(self, pod: Obj) -> None:
        metadata = pod["metadata"]
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase not in ("Succeeded", "Failed") and metadata.get("deletionTimestamp"):
            terminated = {"exitCode": TERMINATED_BY_SIGTERM, "reason": "Error", "finishedAt": wall_time()}
            self._write(
                pod,
                {
                    "phase": "Failed",
                    "containerStatuses": container_statuses(pod, {"terminated": terminated}, ready=False, restarts=0),
                },
            )
        self.store.delete("v1/pods", metadata["name"], metadata["namespace"], grace_period_seconds=0)

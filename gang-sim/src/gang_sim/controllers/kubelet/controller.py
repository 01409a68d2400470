"""The simulated kubelet (one for all nodes) with the *simulated* container runtime.

A pod bound to a node goes ``Pending`` (containers ``ContainerCreating``) -> ``Running`` -> and, when
its run time is over, ``Succeeded`` (every container exited 0) or ``Failed``. Timings and exit code
come from the ``sim.gang.dev/`` pod annotations :mod:`.simulated_runtime` defines (start, run and exit
code), or from a real local process for the images :mod:`...world.images` matches (:mod:`.processes`).

Before it starts the containers (and before each restart) the kubelet builds their environment
(:mod:`.container_env`). An env entry ``valueFrom.configMapKeyRef`` whose ConfigMap or key does not
exist (and is not ``optional``) keeps the pod ``Pending`` with each such container ``Waiting``, reason
``CreateContainerConfigError`` and upstream's message (``configmap "<name>" not found`` /
``couldn't find key <key> in ConfigMap <ns>/<name>``), plus one ``Warning Failed`` Event ``Error:
<message>`` per distinct message, as ``kuberuntime_container.go`` ``startContainer`` reports it. The
pod is retried like a failed pod sync upstream (``pod_workers.go``: requeued after the kubelet's
``backOffPeriod`` of 10 s with jitter factor 0.5, here simulated seconds from the seeded RNG), not on
the ConfigMap's creation, and starts at the first retry that finds every value. Containers that could
be configured wait as ``ContainerCreating`` meanwhile (upstream would start them; every container of
a gang member reads the same env). The same holds for local-process pods.

``restartPolicy`` is honoured as the kubelet does: ``Never`` ends in a terminal phase, ``OnFailure``
restarts containers that exit non-zero and ``Always`` restarts every exit (``restartCount`` grows).
Each pod gets its own loopback IP as ``status.podIP``: ``127.B.0.2`` upwards, where ``B`` is picked at
random per emulator so that emulators running side by side do not hand out the same addresses.

Every terminated container gets ``state.terminated.message`` from its ``terminationMessagePath``
(:mod:`.termination_messages`: a local process's own file, a simulated container's
``sim.gang.dev/termination-message`` annotation).

Graceful node shutdown (a spot preemption, :mod:`..preemption`): every pod of a node with a
termination notice is stopped as :mod:`.shutdown` describes and ends ``Failed``, reason
``Terminated``, with ``DisruptionTarget=True``.

Deletion: a pod being deleted (``deletionTimestamp``) gets SIGTERM, its grace period
(``deletionGracePeriodSeconds``) and SIGKILL, then its terminated statuses with their termination
messages, then the delete with grace period 0 (:mod:`.graceful_deletion`); a pod whose node is
shutting down keeps that stop, and is confirmed deleted once its shutdown status is written. Pods
bound to a node that no longer exists are removed at once (the pod garbage collector's orphan rule:
a force delete; their local processes get SIGTERM and SIGKILL after their own grace period).

A pod the simulated runtime runs without ``sim.gang.dev/run-seconds`` gets one ``Warning`` Event,
reason ``RunsUntilDeleted``, when the kubelet admits it: it will never exit by itself, and the
message says how to change that (:func:`.simulated_runtime.runs_until_deleted_message`).

This module owns the pod lifecycle loop; each concern named above is a module of this package.

Not modelled: probes (a running container is Ready at once), init containers' own lifecycle,
ephemeral containers, resource enforcement, ``envFrom`` and ``secretKeyRef`` (never waited for).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from gang_sim.controllers.base import Controller, Obj, earliest, wall_time
from gang_sim.controllers.kubelet import container_env, graceful_deletion, pod_status, termination_messages
from gang_sim.controllers.kubelet.pod_status import container_statuses, pod_conditions, terminated_statuses
from gang_sim.controllers.kubelet.processes import ProcessRuntime
from gang_sim.controllers.kubelet.shutdown import NodeShutdownStopper
from gang_sim.controllers.kubelet.simulated_runtime import (  # noqa: F401 (re-exported)
    ANNOTATION_PREFIX,
    DEFAULT_START_SECONDS,
    EXIT_CODE,
    RUN_SECONDS,
    START_SECONDS,
    RuntimeSpec,
    runs_until_deleted_message,
    runtime_spec,
)

SYNC_BACKOFF_SECONDS = 10.0
"""Upstream kubelet ``backOffPeriod``: a pod whose sync failed is retried this long after."""
SYNC_BACKOFF_JITTER = 0.5
"""Upstream ``workerBackOffPeriodJitterFactor``: the retry comes up to this fraction later."""


@dataclass
class PodRun:
    """The kubelet's memory of one pod: when it was admitted and when its containers last started."""

    admitted_at: float
    started_at: float | None = None
    restarts: int = 0
    retry_at: float | None = None
    """When a pod waiting in ``CreateContainerConfigError`` is synced again."""
    config_errors: dict[str, str] | None = None
    """The ``CreateContainerConfigError`` messages last reported, by container."""


class Kubelet(Controller):
    component = "kubelet"
    watches = frozenset({"v1/pods", "v1/nodes"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs: dict[str, PodRun] = {}
        self._next_ip = 2
        # A random /16 of 127.0.0.0/8 per emulator keeps pods of emulators running side by side (parallel
        # tests, several developers on one machine) from sharing addresses. Not seeded on purpose.
        self._ip_block = random.SystemRandom().randrange(1, 255)
        images = self.plane.scenario.local_process_images
        self.processes = ProcessRuntime(self.store, self.plane.clock, images, self._dirty.set) if images else None
        self._background: set[asyncio.Task[None]] = set()
        self.shutdown = NodeShutdownStopper(self.store, self.processes, self._spawn, self.plane.clock)
        self.deleting = graceful_deletion.GracefulDeleter(self.store, self.processes, self._spawn, self.plane.clock)

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.processes is not None:
            await self.processes.close()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def reconcile(self, now: float) -> float | None:
        pods = self.store.view("v1/pods")
        nodes = {node["metadata"]["name"] for node in self.store.view("v1/nodes")}
        wake: float | None = None
        live = set()
        for pod in pods:
            uid = pod["metadata"].get("uid", "")
            live.add(uid)
            node = (pod.get("spec") or {}).get("nodeName")
            if not node:
                continue
            with self.guard(pod):
                if node not in nodes:
                    self._remove_orphan(pod)
                    continue
                if pod["metadata"].get("deletionTimestamp"):
                    self._delete(pod)
                    continue
                shutdown = self.plane.cloud.shutdown_of(node)
                if shutdown is not None:
                    self.shutdown.stop(pod, shutdown)
                    continue
                wake = earliest(wake, self._step(pod, now))
        self.shutdown.forget(live)
        self.deleting.forget(live)
        for uid in set(self.runs) - live:
            del self.runs[uid]
            self.plane.pod_ips.pop(uid, None)
            if self.processes is not None:
                self.processes.shorten(uid, 0)  # removed while stopping: force-deleted
                self._spawn(self.processes.kill(uid))
        if self.processes is not None:
            self.processes.update_hosts(pods, self.store.view("v1/services"), self.plane.pod_ips)
        return wake

    def _pod_ip(self, uid: str) -> str:
        if uid not in self.plane.pod_ips:
            number = self._next_ip
            self._next_ip += 1
            self.plane.pod_ips[uid] = f"127.{self._ip_block}.{number // 256}.{number % 256}"
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
        if self.processes is not None and self.processes.handles(pod):
            return self._step_process(pod, now)
        spec = runtime_spec(pod)
        uid = pod["metadata"]["uid"]
        run = self.runs.get(uid)
        if run is None:
            self._admit(pod, PodRun(admitted_at=now))
            if spec.run_seconds is None:
                message = runs_until_deleted_message(pod, self.processes is not None)
                self.plane.record_event(pod, "RunsUntilDeleted", message, warning=True, component=self.component)
            return now + spec.start_seconds
        if run.started_at is None:
            if now < run.admitted_at + spec.start_seconds:
                return run.admitted_at + spec.start_seconds
            waiting = self._wait_for_config(pod, run, now)
            if waiting is not None:
                return waiting
            self._start(pod, run, now)
        assert run.started_at is not None
        if spec.run_seconds is None:
            return None
        exits_at = run.started_at + spec.run_seconds
        if now < exits_at:
            return exits_at
        return self._exit(pod, run, spec.exit_code, now)

    def _admit(self, pod: Obj, run: PodRun) -> str:
        """Track ``run`` for the pod, give it its pod IP and report it Pending/ContainerCreating; the IP."""
        uid = pod["metadata"]["uid"]
        self.runs[uid] = run
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
        return ip

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
            waiting = self._wait_for_config(pod, run, now)
            if waiting is not None:
                run.started_at = None
                return waiting
            self._start(pod, run, now)
            return None
        terminated = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": (pod.get("status") or {}).get("startTime") or wall_time(),
            "finishedAt": wall_time(),
        }
        statuses = container_statuses(pod, {"terminated": terminated}, ready=False, restarts=run.restarts)
        self._write(
            pod,
            {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "conditions": pod_conditions(pod, ready=False, reason="PodCompleted"),
                "containerStatuses": termination_messages.fill_for(
                    pod, statuses, store=self.store, processes=self.processes
                ),
            },
        )
        return None

    def _config_map(self, namespace: str, name: str) -> Obj | None:
        return container_env.config_map_in(self.store, namespace, name)

    def _wait_for_config(self, pod: Obj, run: PodRun, now: float) -> float | None:
        """``None`` when every container's env can be built now; else keep (or put) the pod in
        ``CreateContainerConfigError`` and return when to sync it again (module docstring)."""
        if run.retry_at is not None and now < run.retry_at:
            return run.retry_at
        errors = container_env.config_errors(pod, self._config_map)
        if not errors:
            run.retry_at, run.config_errors = None, None
            return None
        if errors != run.config_errors:
            self._report_config_errors(pod, run, errors)
        run.config_errors = errors
        run.retry_at = now + SYNC_BACKOFF_SECONDS * (1 + SYNC_BACKOFF_JITTER * self.plane.rng.random())
        return run.retry_at

    def _report_config_errors(self, pod: Obj, run: PodRun, errors: dict[str, str]) -> None:
        reported = set((run.config_errors or {}).values())
        for message in dict.fromkeys(errors.values()):
            if message not in reported:
                self.plane.record_event(pod, "Failed", f"Error: {message}", warning=True, component=self.component)
        self._write(pod, pod_status.config_error_status(pod, errors, restarts=run.restarts))

    def _step_process(self, pod: Obj, now: float) -> float | None:
        """Local-process runtime (see :mod:`.processes`): start once the env can be built, then report
        the exit codes."""
        assert self.processes is not None
        uid = pod["metadata"]["uid"]
        run = self.runs.get(uid)
        if run is None:
            run = PodRun(admitted_at=now)
            self._admit(pod, run)
        if run.started_at is None:
            waiting = self._wait_for_config(pod, run, now)
            if waiting is not None:
                return waiting
            self._start_processes(pod, run, now)
            return None
        codes = self.processes.exit_codes(uid)
        if codes is None:
            return None
        statuses = terminated_statuses(pod, codes, default_code=0)
        self._write(
            pod,
            {
                "phase": "Succeeded" if all(code == 0 for code in codes.values()) else "Failed",
                "conditions": pod_conditions(pod, ready=False, reason="PodCompleted"),
                "containerStatuses": termination_messages.fill_for(
                    pod, statuses, store=self.store, processes=self.processes
                ),
            },
        )
        return None

    def _start_processes(self, pod: Obj, run: PodRun, now: float) -> None:
        assert self.processes is not None
        ip = self._pod_ip(pod["metadata"]["uid"])
        pods, services = self.store.view("v1/pods"), self.store.view("v1/services")
        self.processes.update_hosts(pods, services, self.plane.pod_ips)
        try:
            environments = self.processes.environments(pod, ip)
        except ValueError as error:
            run.started_at = now
            self._fail_start(pod, error)
            return
        run.started_at = now
        self._spawn(self._launch(pod, environments))

    def _fail_start(self, pod: Obj, error: BaseException) -> None:
        message = f"Error: failed to start container: {error}"
        self.plane.record_event(pod, "Failed", message, warning=True, component=self.component)
        terminated = {"exitCode": 128, "reason": "StartError", "message": message, "finishedAt": wall_time()}
        self._write(
            pod,
            {
                "phase": "Failed",
                "conditions": pod_conditions(pod, ready=False, reason="PodCompleted"),
                "containerStatuses": container_statuses(pod, {"terminated": terminated}, ready=False, restarts=0),
            },
        )

    async def _launch(self, pod: Obj, environments: dict[str, dict[str, str]]) -> None:
        assert self.processes is not None
        try:
            await self.processes.start(pod, environments)
        except (OSError, ValueError) as error:
            self._fail_start(pod, error)
            if self.processes is not None:
                await self.processes.kill(pod["metadata"]["uid"])
            return
        if self.processes is not None and self.processes.exit_codes(pod["metadata"]["uid"]) is not None:
            return  # already exited: the next pass reports the terminal phase
        self._write(
            pod,
            {
                "phase": "Running",
                "conditions": pod_conditions(pod, ready=True),
                "containerStatuses": container_statuses(
                    pod, {"running": {"startedAt": wall_time()}}, ready=True, restarts=0
                ),
            },
        )

    def _delete(self, pod: Obj) -> None:
        """A pod being deleted: stop it within its grace period (unless its node's shutdown is stopping
        it), then - its containers stopped and its status terminal - confirm the delete."""
        if (pod.get("status") or {}).get("phase") in graceful_deletion.TERMINAL_PHASES:
            graceful_deletion.confirm(self.store, pod)
        elif pod["metadata"]["uid"] not in self.shutdown.stopping:
            self.deleting.stop(pod)

    def _remove_orphan(self, pod: Obj) -> None:
        metadata = pod["metadata"]
        if self.processes is not None and metadata.get("uid") in self.processes.pods:
            self._spawn(self.processes.kill(metadata["uid"]))
        self.store.delete("v1/pods", metadata["name"], metadata["namespace"], grace_period_seconds=0)

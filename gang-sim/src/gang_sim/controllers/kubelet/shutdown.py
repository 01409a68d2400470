"""The kubelet's graceful node shutdown: stopping every pod of a node that got a termination notice.

Upstream ``pkg/kubelet/nodeshutdown`` (https://kubernetes.io/docs/concepts/cluster-administration/node-shutdown/):
each pod is killed with a grace period of ``min(terminationGracePeriodSeconds, budget)``; once its
containers stopped its status is ``Failed``, reason ``Terminated``, message "Pod was terminated in
response to imminent node shutdown." with condition ``DisruptionTarget=True/TerminationByKubelet``
(:func:`..preemption.shutdown_status`).

That status is one write, made when the containers have stopped; until then the pod stays ``Running``
with running containers and no ``DisruptionTarget``. Upstream, ``SyncTerminatingPod``
(``pkg/kubelet/kubelet.go``) sets the status the shutdown manager's function built
(``pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go``) before it kills the containers, but the
status manager's ``mergePodStatus`` (``pkg/kubelet/status/status_manager.go``) keeps the old phase,
reason and message and drops ``DisruptionTarget`` while the pod could have running containers: the
API server gets them together with the terminal phase.

- A local-process pod's processes get a real SIGTERM, then SIGKILL when the grace period is over
  (simulated seconds); each container's exit code is the process's (143 after SIGTERM, 137 after
  SIGKILL, as a container runtime reports a signal).
- A simulated container stops at once on SIGTERM: exit code 143.

Each container's termination message is filled as on any exit (:mod:`.termination_messages`): a
trainer that writes its checkpoint step there on SIGTERM reports it in ``state.terminated.message``.

The budget is the preemption's ``podGracePeriodSeconds`` (:mod:`...world.scenario_preemptions`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.base import Obj
from gang_sim.controllers.kubelet import termination_messages
from gang_sim.controllers.kubelet.pod_status import pod_conditions, terminated_statuses
from gang_sim.controllers.kubelet.processes import ProcessRuntime
from gang_sim.controllers.preemption import shutdown_status
from gang_sim.world.cloud import NodeShutdown

TERMINATED_BY_SIGTERM = 143


class NodeShutdownStopper:
    """Stops each pod of a shutting-down node once (see module docstring)."""

    def __init__(
        self,
        store: Any,
        processes: ProcessRuntime | None,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.store = store
        self.processes = processes
        self.spawn = spawn
        self.stopping: set[str] = set()

    def stop(self, pod: Obj, shutdown: NodeShutdown) -> None:
        """Start stopping ``pod`` unless it is already stopping or finished."""
        uid = pod["metadata"]["uid"]
        if uid in self.stopping or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        running = None if self.processes is None else self.processes.pods.get(uid)
        if running is not None and not running.started:
            return  # still starting its processes: stopped at the pass after they started
        self.stopping.add(uid)
        if running is not None and self.processes is not None:
            self.spawn(self._stop_processes(pod, self.processes, shutdown.pod_grace_period_seconds))
            return
        names = [container["name"] for container in (pod.get("spec") or {}).get("containers") or []]
        self._write_stopped(pod, dict.fromkeys(names, TERMINATED_BY_SIGTERM))

    def forget(self, live_uids: set[str]) -> None:
        self.stopping &= live_uids

    async def _stop_processes(self, pod: Obj, processes: ProcessRuntime, grace_seconds: float) -> None:
        codes = await processes.stop(pod["metadata"]["uid"], grace_seconds)
        self._write_stopped(pod, codes)

    def _write_stopped(self, pod: Obj, codes: dict[str, int]) -> None:
        metadata = pod["metadata"]
        try:
            current = self.store.get("v1/pods", metadata["name"], metadata["namespace"])
        except ApiError as error:
            if error.code == 404:
                return
            raise
        if current["metadata"].get("uid") != metadata["uid"]:
            return
        statuses = terminated_statuses(current, codes, default_code=137)
        termination_messages.fill_for(current, statuses, store=self.store, processes=self.processes)
        conditions = pod_conditions(current, ready=False, reason="PodCompleted")
        self.store.patch(
            "v1/pods",
            metadata["name"],
            {"status": shutdown_status(current, conditions, statuses)},
            namespace=metadata["namespace"],
            subresource="status",
        )

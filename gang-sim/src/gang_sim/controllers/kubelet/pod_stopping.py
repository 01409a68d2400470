"""Stopping one pod's containers within a grace period, once: what a node shutdown and a graceful
delete share.

Upstream both end in the kubelet's ``killPod`` (``pkg/kubelet/kuberuntime/kuberuntime_manager.go``):
SIGTERM to every container, SIGKILL to those still running when the grace period is over, then the
terminated container statuses written by the status manager. What differs is where the grace period
comes from and what is written once the containers stopped - a subclass's :meth:`PodStopper.write`.

- A local-process pod's processes get a real SIGTERM, then SIGKILL when the grace period is over
  (simulated seconds); each container's exit code is the process's (143 after SIGTERM, 137 after
  SIGKILL, as a container runtime reports a signal).
- A simulated container stops at once on SIGTERM (exit code 143), or ``sim.gang.dev/stop-seconds``
  later (:mod:`.simulated_runtime`); one that would take the whole grace period or more is killed
  when it ends (137).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.base import Obj
from gang_sim.controllers.kubelet import termination_messages
from gang_sim.controllers.kubelet.pod_status import terminated_statuses
from gang_sim.controllers.kubelet.processes import ProcessRuntime
from gang_sim.controllers.kubelet.simulated_runtime import runtime_spec
from gang_sim.world.clock import Clock

TERMINATED_BY_SIGTERM = 143
TERMINATED_BY_SIGKILL = 137


def _stop_seconds(pod: Obj) -> float:
    """``sim.gang.dev/stop-seconds`` of a simulated pod; 0 when malformed (its admission reported it)."""
    try:
        return runtime_spec(pod).stop_seconds
    except ValueError:
        return 0.0


class PodStopper(ABC):
    """Stops each pod it is given once; :meth:`write` reports how its containers ended."""

    def __init__(
        self,
        store: Any,
        processes: ProcessRuntime | None,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        clock: Clock,
    ) -> None:
        self.store = store
        self.processes = processes
        self.spawn = spawn
        self.clock = clock
        self.stopping: dict[str, float] = {}
        """uid -> grace period of the pods being stopped or stopped (until :meth:`forget` drops the gone ones)."""

    def begin(self, pod: Obj, grace_seconds: float) -> None:
        """Start stopping ``pod`` within ``grace_seconds`` unless that has begun already; a stop under
        way with a longer grace period has it shortened (its local processes' SIGKILL comes sooner)."""
        uid = pod["metadata"]["uid"]
        if uid in self.stopping:
            if grace_seconds < self.stopping[uid]:
                self.stopping[uid] = grace_seconds
                if self.processes is not None:
                    self.processes.shorten(uid, grace_seconds)
            return
        running = None if self.processes is None else self.processes.pods.get(uid)
        if running is not None and not running.started:
            return  # still starting its processes: stopped at the pass after they started
        self.stopping[uid] = grace_seconds
        if running is not None and self.processes is not None:
            self.spawn(self._stop_processes(pod, self.processes, grace_seconds))
            return
        stop_seconds = _stop_seconds(pod)
        if stop_seconds <= 0:
            self._stopped(pod, self._simulated_codes(pod, TERMINATED_BY_SIGTERM))
            return
        self.spawn(self._stop_simulated(pod, stop_seconds, grace_seconds))

    def forget(self, live_uids: set[str]) -> None:
        self.stopping = {uid: grace for uid, grace in self.stopping.items() if uid in live_uids}

    async def _stop_processes(self, pod: Obj, processes: ProcessRuntime, grace_seconds: float) -> None:
        codes = await processes.stop(pod["metadata"]["uid"], grace_seconds)
        self._stopped(pod, codes)

    async def _stop_simulated(self, pod: Obj, stop_seconds: float, grace_seconds: float) -> None:
        await self.clock.sleep(min(stop_seconds, grace_seconds))
        code = TERMINATED_BY_SIGTERM if stop_seconds < grace_seconds else TERMINATED_BY_SIGKILL
        self._stopped(pod, self._simulated_codes(pod, code))

    @staticmethod
    def _simulated_codes(pod: Obj, code: int) -> dict[str, int]:
        return {container["name"]: code for container in (pod.get("spec") or {}).get("containers") or []}

    def _stopped(self, pod: Obj, codes: dict[str, int]) -> None:
        """The containers of ``pod`` ended with ``codes``: :meth:`write` the pod as it is now, unless
        it is gone or replaced by a pod of the same name."""
        metadata = pod["metadata"]
        try:
            current = self.store.get("v1/pods", metadata["name"], metadata["namespace"])
        except ApiError as error:
            if error.code == 404:
                return
            raise
        if current["metadata"].get("uid") != metadata["uid"]:
            return
        self.write(current, codes)

    def terminated(self, current: Obj, codes: dict[str, int]) -> list[dict[str, Any]]:
        """The terminated container statuses of ``current`` for ``codes`` (SIGKILL's code for a
        container without one), with the termination message each container wrote."""
        statuses = terminated_statuses(current, codes, default_code=TERMINATED_BY_SIGKILL)
        termination_messages.fill_for(current, statuses, store=self.store, processes=self.processes)
        return statuses

    @abstractmethod
    def write(self, current: Obj, codes: dict[str, int]) -> None:
        """Report ``current`` (the pod as stored now) after its containers ended with ``codes``."""

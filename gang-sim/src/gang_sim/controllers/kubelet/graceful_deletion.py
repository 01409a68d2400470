"""The kubelet's side of a graceful pod delete: stop the containers within the grace period, report
how they ended, then confirm the delete.

Upstream (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination): a
DELETE of a running pod sets ``deletionTimestamp`` and ``deletionGracePeriodSeconds`` (the request's
``gracePeriodSeconds``, else the pod's ``terminationGracePeriodSeconds``); the kubelet sends SIGTERM to
every container, SIGKILL to those still running when the grace period is over, writes the terminated
container statuses (with the termination message each container wrote to its
``terminationMessagePath``) and then deletes the pod with grace period 0
(``pkg/kubelet/status/status_manager.go`` ``syncPod``: ``canBeDeleted``).

Only for pods marked that way, i.e. with the Store's opt-in ``graceful_pod_deletion``
(``deletionGracePeriodSeconds`` > 0); without it a pod is gone from the Store at once and the kubelet
only stops its processes. The grace period runs on the control plane's clock (simulated seconds).

- A local-process pod's processes get a real SIGTERM, then SIGKILL after the grace period; each
  container's exit code is the process's (143 after SIGTERM, 137 after SIGKILL).
- A simulated container stops at once on SIGTERM: exit code 143.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.base import Obj
from gang_sim.controllers.kubelet import termination_messages
from gang_sim.controllers.kubelet.pod_status import pod_conditions, terminated_statuses
from gang_sim.controllers.kubelet.processes import ProcessRuntime

TERMINATED_BY_SIGTERM = 143
TERMINATED_BY_SIGKILL = 137


def is_graceful(pod: Obj) -> bool:
    """``pod`` is marked for deletion with a grace period left to the kubelet."""
    metadata = pod.get("metadata") or {}
    return bool(metadata.get("deletionTimestamp")) and int(metadata.get("deletionGracePeriodSeconds") or 0) > 0


class GracefulDeleter:
    """Stops each pod marked for graceful deletion once, reports its containers, confirms the delete."""

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

    def stop(self, pod: Obj) -> None:
        """Start stopping ``pod`` (see module docstring) unless that has begun already."""
        uid = pod["metadata"]["uid"]
        if uid in self.stopping:
            return
        running = None if self.processes is None else self.processes.pods.get(uid)
        if running is not None and not running.started:
            return  # still starting its processes: stopped at the pass after they started
        self.stopping.add(uid)
        grace = int(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
        if running is not None and self.processes is not None:
            self.spawn(self._stop_processes(pod, self.processes, grace))
            return
        names = [container["name"] for container in (pod.get("spec") or {}).get("containers") or []]
        self._finish(pod, dict.fromkeys(names, TERMINATED_BY_SIGTERM))

    def forget(self, live_uids: set[str]) -> None:
        self.stopping &= live_uids

    async def _stop_processes(self, pod: Obj, processes: ProcessRuntime, grace_seconds: float) -> None:
        codes = await processes.stop(pod["metadata"]["uid"], grace_seconds)
        self._finish(pod, codes)

    def _finish(self, pod: Obj, codes: dict[str, int]) -> None:
        metadata = pod["metadata"]
        try:
            current = self.store.get("v1/pods", metadata["name"], metadata["namespace"])
        except ApiError as error:
            if error.code == 404:
                return
            raise
        if current["metadata"].get("uid") != metadata["uid"]:
            return
        if (current.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            statuses = terminated_statuses(current, codes, default_code=TERMINATED_BY_SIGKILL)
            termination_messages.fill_for(current, statuses, store=self.store, processes=self.processes)
            self.store.patch(
                "v1/pods",
                metadata["name"],
                {
                    "status": {
                        "phase": "Failed",
                        "conditions": pod_conditions(current, ready=False, reason="PodCompleted"),
                        "containerStatuses": statuses,
                    }
                },
                namespace=metadata["namespace"],
                subresource="status",
            )
        try:
            self.store.delete("v1/pods", metadata["name"], metadata["namespace"], grace_period_seconds=0)
        except ApiError as error:
            if error.code != 404:
                raise

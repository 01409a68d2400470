"""The kubelet's side of a pod delete: stop the containers within the grace period, report how they
ended, then confirm the delete.

Upstream (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination): a
DELETE of a pod bound to a node sets ``deletionTimestamp`` and ``deletionGracePeriodSeconds`` (the
request's ``gracePeriodSeconds``, else the pod's ``terminationGracePeriodSeconds``) and leaves the
pod to its kubelet (:func:`gang_sim.apiserver.garbage.plan_delete`). The kubelet sends SIGTERM to
every container, SIGKILL to those still running when the grace period is over, writes the
terminated container statuses (with the termination message each container wrote to its
``terminationMessagePath``) and then deletes the pod with grace period 0
(``pkg/kubelet/status/status_manager.go`` ``syncPod``: ``canBeDeleted`` once no container runs).
A later delete may shorten the grace period; the kubelet then kills sooner (:mod:`.pod_stopping`).

Here the stop is :class:`GracefulDeleter` (:mod:`.pod_stopping` describes how containers stop,
local processes and simulated ones), and :func:`confirm` is the delete with grace 0, made by the
kubelet's pass once the pod's phase is terminal - whoever stopped its containers (this deletion, or
a node shutdown that was under way when the delete came, :mod:`.shutdown`). The grace period runs on
the control plane's clock (simulated seconds).
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.base import Obj
from gang_sim.controllers.kubelet.pod_status import pod_conditions
from gang_sim.controllers.kubelet.pod_stopping import PodStopper

TERMINAL_PHASES = ("Succeeded", "Failed")


def confirm(store: Any, pod: Obj) -> None:
    """The kubelet's delete with grace period 0 of a pod whose containers have stopped (a pod gone
    meanwhile is fine; finalizers may still hold it)."""
    metadata = pod["metadata"]
    try:
        store.delete("v1/pods", metadata["name"], metadata["namespace"], grace_period_seconds=0)
    except ApiError as error:
        if error.code != 404:
            raise


class GracefulDeleter(PodStopper):
    """Stops each pod being deleted once, within its grace period, and reports its containers."""

    def stop(self, pod: Obj) -> None:
        """Start stopping ``pod`` within its ``deletionGracePeriodSeconds`` unless that has begun
        already (a shorter one than the stop began with brings SIGKILL forward)."""
        self.begin(pod, int(pod["metadata"].get("deletionGracePeriodSeconds") or 0))

    def write(self, current: Obj, codes: dict[str, int]) -> None:
        """The terminated statuses and the terminal phase - ``Succeeded`` when every container exited 0,
        else ``Failed`` (``getPhase`` in ``pkg/kubelet/kubelet_pods.go`` for a terminal pod) - and the
        kubelet's next pass confirms the delete; a pod that had finished already is confirmed now,
        since no write wakes that pass."""
        if (current.get("status") or {}).get("phase") in TERMINAL_PHASES:
            confirm(self.store, current)
            return
        metadata = current["metadata"]
        statuses = self.terminated(current, codes)
        succeeded = all(status["state"]["terminated"].get("exitCode") == 0 for status in statuses)
        self.store.patch(
            "v1/pods",
            metadata["name"],
            {
                "status": {
                    "phase": "Succeeded" if succeeded else "Failed",
                    "conditions": pod_conditions(current, ready=False, reason="PodCompleted"),
                    "containerStatuses": statuses,
                }
            },
            namespace=metadata["namespace"],
            subresource="status",
        )

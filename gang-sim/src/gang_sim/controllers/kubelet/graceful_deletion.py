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

The containers are stopped as :mod:`.pod_stopping` describes.
"""

from __future__ import annotations

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.base import Obj
from gang_sim.controllers.kubelet.pod_status import pod_conditions
from gang_sim.controllers.kubelet.pod_stopping import PodStopper


def is_graceful(pod: Obj) -> bool:
    """``pod`` is marked for deletion with a grace period left to the kubelet."""
    metadata = pod.get("metadata") or {}
    return bool(metadata.get("deletionTimestamp")) and int(metadata.get("deletionGracePeriodSeconds") or 0) > 0


class GracefulDeleter(PodStopper):
    """Stops each pod marked for graceful deletion once, reports its containers, confirms the delete."""

    def stop(self, pod: Obj) -> None:
        """Start stopping ``pod`` within its ``deletionGracePeriodSeconds`` unless that has begun already."""
        self.begin(pod, int(pod["metadata"].get("deletionGracePeriodSeconds") or 0))

    def write(self, current: Obj, codes: dict[str, int]) -> None:
        """The terminated statuses (unless the pod had finished already), then the delete with grace 0."""
        metadata = current["metadata"]
        if (current.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            self.store.patch(
                "v1/pods",
                metadata["name"],
                {
                    "status": {
                        "phase": "Failed",
                        "conditions": pod_conditions(current, ready=False, reason="PodCompleted"),
                        "containerStatuses": self.terminated(current, codes),
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

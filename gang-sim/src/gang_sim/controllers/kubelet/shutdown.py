"""The kubelet's graceful node shutdown: stopping every pod of a node that got a termination notice.

Upstream ``pkg/kubelet/nodeshutdown`` (https://kubernetes.io/docs/concepts/cluster-administration/node-shutdown/):
each pod is killed with a grace period of ``min(terminationGracePeriodSeconds, budget)``
(``nodeshutdown_manager_linux.go``); once its containers stopped its status is ``Failed``, reason
``Terminated``, message "Pod was terminated in response to imminent node shutdown." with condition
``DisruptionTarget=True/TerminationByKubelet`` (:func:`..preemption.shutdown_status`). A pod deleted
meanwhile keeps this stop; the kubelet confirms its delete once it is written (:mod:`.graceful_deletion`).

That status is one write, made when the containers have stopped; until then the pod stays ``Running``
with running containers and no ``DisruptionTarget``. Upstream, ``SyncTerminatingPod``
(``pkg/kubelet/kubelet.go``) sets the status the shutdown manager's function built
(``pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go``) before it kills the containers, but the
status manager's ``mergePodStatus`` (``pkg/kubelet/status/status_manager.go``) keeps the old phase,
reason and message and drops ``DisruptionTarget`` while the pod could have running containers: the
API server gets them together with the terminal phase.

The containers are stopped as :mod:`.pod_stopping` describes.

Each container's termination message is filled as on any exit (:mod:`.termination_messages`): a
trainer that writes its checkpoint step there on SIGTERM reports it in ``state.terminated.message``.

The budget is the preemption's ``podGracePeriodSeconds`` (:mod:`...world.scenario_preemptions`).
"""

from __future__ import annotations

from gang_sim.controllers.base import Obj
from gang_sim.controllers.kubelet.pod_status import pod_conditions
from gang_sim.controllers.kubelet.pod_stopping import PodStopper
from gang_sim.controllers.preemption import shutdown_status
from gang_sim.world.cloud import NodeShutdown


class NodeShutdownStopper(PodStopper):
    """Stops each pod of a shutting-down node once (see module docstring)."""

    def stop(self, pod: Obj, shutdown: NodeShutdown) -> None:
        """Start stopping ``pod`` unless it is already stopping or finished."""
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        self.begin(pod, min(shutdown.pod_grace_period_seconds, float(own)))

    def write(self, current: Obj, codes: dict[str, int]) -> None:
        """The shutdown's terminal status, in one write (see module docstring)."""
        statuses = self.terminated(current, codes)
        conditions = pod_conditions(current, ready=False, reason="PodCompleted")
        metadata = current["metadata"]
        self.store.patch(
            "v1/pods",
            metadata["name"],
            {"status": shutdown_status(current, conditions, statuses)},
            namespace=metadata["namespace"],
            subresource="status",
        )

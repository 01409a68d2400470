"""``reservation="auto"``: Kubernetes' own gang scheduling where the cluster serves it, else ``gates``.

Both modes give the same all-or-nothing start: ``workload`` writes a ``scheduling.k8s.io`` PodGroup
whose gang policy the kube-scheduler enforces where it binds (KEP-4671,
https://github.com/kubernetes/enhancements/tree/master/keps/sig-scheduling/4671-gang-scheduling),
``gates`` books the nodes with a ProvisioningRequest and releases gated members together. An
``auto`` gang is configured as a ``gates`` gang (``GATES``: the mode every cluster with the
autoscaler's ProvisioningRequest CRD serves); each try asks the cluster its plan runs on, once,
before anything is created, and runs as a ``workload`` gang when that cluster serves the PodGroup
API. The choice is per try, because a fallback step may move the gang to another cluster
(``fallback.OtherCluster``), and it is stored with the try's plan, so the try's later entry points,
an adopting try and the UI read the mode the try really ran in.

What only a ProvisioningRequest has is refused for ``auto`` when the operator's arguments are
checked (``reservation.tries.arguments``): ``provisioning_class``, ``provisioning_parameters`` and
``OtherProvisioningClass`` steps; the class of a ``gates`` try is then the default one.

Pure: the cluster's answer is an input.
"""

from __future__ import annotations

from dataclasses import replace

from airflow_provider_gang.reservation.records.tries import TryPlan
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

AUTO = "auto"
"""The operator's ``reservation`` value that chooses per try."""
CONFIGURED_MODE = ReservationMode.GATES
"""The mode an ``auto`` gang is configured (and planned) in before a try chooses."""
CANDIDATE_MODES = (ReservationMode.GATES, ReservationMode.WORKLOAD)
"""The modes an ``auto`` try may run in; the operator's arguments must be valid for both."""


def as_workload(spec: GangSpec) -> GangSpec:
    """``spec`` (configured as ``gates``) as the same gang in ``workload`` mode: no ProvisioningRequest,
    so no class nor parameters."""
    return replace(spec, mode=ReservationMode.WORKLOAD, provisioning_class=None, provisioning_parameters={})


def choose(
    plan: TryPlan, *, pod_groups_served: bool, conn_id: str, topology_served: bool = True
) -> tuple[TryPlan, str]:
    """The plan of an ``auto`` try as it runs, and the sentence that says what was chosen and why.

    ``plan`` was made for the ``gates`` spec; with ``pod_groups_served`` (and, for a gang with a
    required topology, ``topology_served``: the API server keeps a PodGroup's topology constraint) its
    spec becomes the same gang in ``workload`` mode. Raises ``ValueError`` for a plan that is not in
    the configured mode: only a new plan chooses, a resumed or adopted try keeps the mode it was
    stored with.
    """
    spec = plan.spec
    if spec.mode is not CONFIGURED_MODE:
        raise ValueError(f"only a plan in {CONFIGURED_MODE.value!r} mode chooses, not {spec.mode.value!r}")
    if not pod_groups_served:
        return plan, (
            f"reservation='auto' chose 'gates' for try {plan.attempt}: cluster {conn_id!r} does not serve "
            "Kubernetes' own gang scheduling (PodGroups); a ProvisioningRequest books the nodes and the "
            "members are released together"
        )
    if spec.required_topology is not None and not topology_served:
        return plan, (
            f"reservation='auto' chose 'gates' for try {plan.attempt}: cluster {conn_id!r} serves PodGroups "
            "but drops their topology constraint (feature gate TopologyAwareWorkloadScheduling off); the "
            "operator pins the members to one domain and releases them together"
        )
    return replace(plan, spec=as_workload(spec)), (
        f"reservation='auto' chose 'workload' for try {plan.attempt}: cluster {conn_id!r} serves "
        "Kubernetes' own gang scheduling (PodGroups); the kube-scheduler binds the members all at once or none"
    )

"""The Kueue launch object: a ``batch/v1`` Indexed Job in a LocalQueue.

Kueue's webhook suspends a Job with the ``kueue.x-k8s.io/queue-name`` label; we create it suspended
anyway so nothing starts if the webhook is missing. ``kueue.x-k8s.io/job-min-parallelism`` enables
partial admission down to ``min_size`` (Kueue requires ``0 < min < parallelism``), and
``kueue.x-k8s.io/job-completions-equal-parallelism`` makes Kueue lower ``completions`` with
``parallelism``: otherwise a partially admitted Job would run its remaining completions after the
first wave, which is not a gang. Kueue creates
the Workload (``job-<name>-<hash>``, label ``kueue.x-k8s.io/job-uid``) and, when admitted, unsuspends
the Job; the Job controller then creates pods ``<job>-<index>-<suffix>`` whose hostnames are
``<job>-<index>``.

Partial admission lowers ``spec.parallelism`` (and, with the annotation above, ``completions``) but
never the pod template (Kueue ``pkg/controller/jobs/job/job_controller.go``,
``RunWithPodSetsInfo``), so a size written into the env would be the requested one. With ``min_size
< size`` the template's size-dependent variables (``GANG_SIZE``, ``WORLD_SIZE``, ``PET_NNODES``,
``JAX_NUM_PROCESSES``) therefore read key ``size`` of the gang's world ConfigMap through
``valueFrom.configMapKeyRef`` (:mod:`.world`): the operator writes it with
``Decision.admitted_count`` once the Workload is admitted, and the kubelet holds every container in
``CreateContainerConfigError`` until then, so the admitted members all start with the admitted size.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common, pods, rank_env
from airflow_provider_gang.reservation.multikueue import MANAGED_BY
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"


def job(
    spec: GangSpec, *, owner_uid: str, master_address: str | None = None, multikueue: bool = False
) -> dict[str, Any]:
    """The suspended Indexed Job of ``size`` completions, ``backoffLimit: 0`` (one member failing
    fails the Job, hence the gang), rank environment from the completion index and, with partial
    admission, sizes from the world ConfigMap (module docstring). ``multikueue``: the queue
    dispatches to worker clusters, so the Job carries ``spec.managedBy: kueue.x-k8s.io/multikueue``
    (``reservation.multikueue``): the manager's Job controller leaves it alone and Kueue copies it to
    the worker that admits it (with ``managedBy`` cleared there)."""
    if spec.mode is not ReservationMode.KUEUE or spec.queue is None:
        raise ValueError("job needs reservation='kueue' with a queue")
    names = naming.GangNames(spec.name)
    template = pods.member_template(spec)
    env = rank_env.rank_environment(spec, None, master_address=master_address)
    template["spec"]["containers"] = [rank_env.with_environment(c, env) for c in template["spec"]["containers"]]
    template["spec"]["subdomain"] = names.service
    template["metadata"]["annotations"] = {
        **(template["metadata"].get("annotations") or {}),
        **topology_annotations(spec),
    }
    if not template["metadata"]["annotations"]:
        del template["metadata"]["annotations"]
    metadata = common.metadata(
        spec, names.job, common.ROLE_RESERVATION, owner_uid, **{pods.KUEUE_QUEUE_LABEL: spec.queue}
    )
    if spec.floor < spec.size:
        metadata["annotations"] = {
            MIN_PARALLELISM_ANNOTATION: str(spec.floor),
            COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: "true",
        }
    job_spec: dict[str, Any] = {
        "suspend": True,
        "parallelism": spec.size,
        "completions": spec.size,
        "completionMode": "Indexed",
        "backoffLimit": 0,
        "template": template,
    }
    if multikueue:
        job_spec["managedBy"] = MANAGED_BY
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": job_spec}


def topology_annotations(spec: GangSpec) -> dict[str, str]:
    """The PodSet's Topology Aware Scheduling request: ``kueue.x-k8s.io/podset-required-topology`` or
    ``-preferred-topology`` with the gang's label on the Job's pod template, from which Kueue builds
    the PodSet's ``topologyRequest`` (sigs.k8s.io/kueue ``pkg/controller/jobframework/tas.go``); with
    the Job's completion index as its pod index label, Kueue's TopologyUngater gives consecutive
    indices the same lowest domains. ``{}`` for a gang without a topology."""
    if spec.required_topology is not None:
        return {REQUIRED_TOPOLOGY_ANNOTATION: spec.required_topology}
    if spec.preferred_topology is not None:
        return {PREFERRED_TOPOLOGY_ANNOTATION: spec.preferred_topology}
    return {}

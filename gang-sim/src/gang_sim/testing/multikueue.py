"""Wire emulated clusters as Kueue's MultiKueue: one manager, any number of workers.

:func:`connect` creates, in started :class:`~.harness.ClusterHarness` es with a scenario (each its own
API server and control plane), what a MultiKueue setup holds (https://kueue.sigs.k8s.io/docs/tasks/manage/setup_multikueue/):

- on the **manager**: per worker a Secret ``<worker>-kubeconfig`` in ``kueue-system`` with the
  worker's kubeconfig (its admin's token and CA data) and a MultiKueueCluster naming it; a
  MultiKueueConfig listing them; an AdmissionCheck of controller ``kueue.x-k8s.io/multikueue`` with
  that config; a ResourceFlavor and a ClusterQueue with that check and ``manager_quota``; and the
  LocalQueue ``queue`` in ``namespace``;
- on **each worker**: the same ResourceFlavor, a ClusterQueue with the worker's quota (what it does
  not list it cannot admit: a worker without ``nvidia.com/gpu`` never admits a GPU gang) and the
  LocalQueue ``queue`` in ``namespace`` (MultiKueue copies Workloads into the same queue there).

The manager's simulated MultiKueue (``gang_sim.controllers.kueue.dispatcher``) then reaches the
workers over HTTPS through those Secrets, as Kueue does; :func:`wait_until_active` waits for every
MultiKueueCluster's ``Active`` condition.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from gang_sim.testing.eventually import eventually
from gang_sim.testing.harness import ClusterHarness

KUEUE = "kueue.x-k8s.io/v1beta2"
KUEUE_NAMESPACE = "kueue-system"
CHECK = "multikueue"
FLAVOR = "default-flavor"
Quota = Mapping[str, str]
"""``{resource: nominal quota}``, e.g. ``{"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4"}``."""


def connect(
    manager: ClusterHarness,
    workers: Mapping[str, tuple[ClusterHarness, Quota]],
    *,
    manager_quota: Quota,
    queue: str = "team",
    namespace: str = "default",
) -> None:
    """Create the MultiKueue objects of the module docstring (``workers``: name -> (harness, quota))."""
    manager.create("v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}})
    for name, (worker, quota) in workers.items():
        kubeconfig = worker.kubeconfig_path.read_bytes()
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{name}-kubeconfig", "namespace": KUEUE_NAMESPACE},
            "data": {"kubeconfig": base64.b64encode(kubeconfig).decode()},
        }
        manager.create("v1/secrets", secret, KUEUE_NAMESPACE)
        source = {"kubeConfig": {"locationType": "Secret", "location": f"{name}-kubeconfig"}}
        manager.create(
            f"{KUEUE}/multikueueclusters",
            {
                "apiVersion": KUEUE,
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {"clusterSource": source},
            },
        )
        queues(worker, quota, queue=queue, namespace=namespace)
    manager.create(
        f"{KUEUE}/multikueueconfigs",
        {
            "apiVersion": KUEUE,
            "kind": "MultiKueueConfig",
            "metadata": {"name": CHECK},
            "spec": {"clusters": list(workers)},
        },
    )
    parameters = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": CHECK}
    manager.create(
        f"{KUEUE}/admissionchecks",
        {
            "apiVersion": KUEUE,
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": parameters},
        },
    )
    queues(manager, manager_quota, queue=queue, namespace=namespace, admission_check=CHECK)


def queues(
    cluster: ClusterHarness, quota: Quota, *, queue: str, namespace: str, admission_check: str | None = None
) -> None:
    """The ResourceFlavor (once), a ClusterQueue ``cq-<queue>`` of ``quota`` (with ``admission_check``)
    and the LocalQueue ``queue`` in ``namespace``; call it again for another queue."""
    if not [item for item in cluster.objects(f"{KUEUE}/resourceflavors", None) if item["metadata"]["name"] == FLAVOR]:
        cluster.create(
            f"{KUEUE}/resourceflavors", {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}
        )
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(quota),
                "flavors": [
                    {
                        "name": FLAVOR,
                        "resources": [{"name": name, "nominalQuota": value} for name, value in quota.items()],
                    }
                ],
            }
        ],
    }
    if admission_check is not None:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    cluster.create(
        f"{KUEUE}/clusterqueues",
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq-{queue}"}, "spec": spec},
    )
    cluster.create(
        f"{KUEUE}/localqueues",
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": namespace},
            "spec": {"clusterQueue": f"cq-{queue}"},
        },
        namespace,
    )


def cluster_condition(manager: ClusterHarness, name: str) -> Mapping[str, Any] | None:
    """The ``Active`` condition of MultiKueueCluster ``name`` on the manager, or ``None``."""
    for cluster in manager.objects(f"{KUEUE}/multikueueclusters", None):
        if cluster["metadata"]["name"] == name:
            found = [item for item in (cluster.get("status") or {}).get("conditions") or [] if item["type"] == "Active"]
            return found[0] if found else None
    return None


def wait_until_active(manager: ClusterHarness, names: list[str], *, timeout: float = 30.0) -> None:
    """Until every MultiKueueCluster of ``names`` reports ``Active=True`` (raises on the timeout)."""
    eventually(
        lambda: all((cluster_condition(manager, name) or {}).get("status") == "True" for name in names) or None,
        timeout=timeout,
        what=f"MultiKueueClusters {names} to report Active=True",
    )

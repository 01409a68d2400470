"""Kueue's MultiKueue set up on clusters of either backend: one manager, any number of workers.

What a MultiKueue setup holds (https://kueue.sigs.k8s.io/docs/tasks/manage/setup_multikueue/), as
manifests (:func:`manager_objects`, :func:`queue_objects`), for the emulator (:func:`connect`, on
started :class:`~.harness.ClusterHarness` es with a scenario) and for the real control plane
(``gang_sim.testing.real.multikueue``):

- on the **manager**: per worker a Secret ``<worker>-kubeconfig`` in ``kueue-system`` with the
  worker's kubeconfig and a MultiKueueCluster naming it; a MultiKueueConfig listing them; an
  AdmissionCheck of controller ``kueue.x-k8s.io/multikueue`` with that config; a ResourceFlavor and a
  ClusterQueue with that check and the manager's quota; and the LocalQueue ``queue`` in ``namespace``;
- on **each worker**: the same ResourceFlavor, a ClusterQueue with the worker's quota (what it does
  not list it cannot admit: a worker without ``nvidia.com/gpu`` never admits a GPU gang) and the
  LocalQueue ``queue`` in ``namespace`` (MultiKueue copies Workloads into the same queue there).

On the emulator, the manager's simulated MultiKueue (``gang_sim.controllers.kueue.dispatcher``) then
reaches the workers over HTTPS through those Secrets, as Kueue does; :func:`wait_until_active` waits
until every MultiKueueCluster and every queue of the three clusters is ``Active``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from gang_sim.testing.eventually import eventually
from gang_sim.testing.harness import ClusterHarness

KUEUE = "kueue.x-k8s.io/v1beta2"
KUEUE_NAMESPACE = "kueue-system"
QUEUE_KINDS = ("clusterqueues", "localqueues")
"""The queue kinds whose ``Active`` condition a Workload's admission waits for."""
CHECK = "multikueue"
FLAVOR = "default-flavor"
Quota = Mapping[str, str]
"""``{resource: nominal quota}``, e.g. ``{"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4"}``."""
Manifest = dict[str, Any]


def flavor() -> Manifest:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}


def queue_objects(quota: Quota, *, queue: str, namespace: str, admission_check: str | None = None) -> list[Manifest]:
    """A ClusterQueue ``cq-<queue>`` of ``quota`` on :data:`FLAVOR` (with ``admission_check``) and the
    LocalQueue ``queue`` in ``namespace`` (the flavor is :func:`flavor`, once per cluster)."""
    resources = [{"name": name, "nominalQuota": value} for name, value in quota.items()]
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": list(quota), "flavors": [{"name": FLAVOR, "resources": resources}]}],
    }
    if admission_check is not None:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    local = {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": queue, "namespace": namespace},
        "spec": {"clusterQueue": f"cq-{queue}"},
    }
    return [{"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq-{queue}"}, "spec": spec}, local]


def manager_objects(kubeconfigs: Mapping[str, bytes]) -> list[Manifest]:
    """The manager's MultiKueue objects for the workers of ``kubeconfigs`` (name -> kubeconfig file
    content): their Secrets, MultiKueueClusters, the MultiKueueConfig and the AdmissionCheck."""
    objects: list[Manifest] = []
    for name, kubeconfig in kubeconfigs.items():
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-kubeconfig", "namespace": KUEUE_NAMESPACE},
                "data": {"kubeconfig": base64.b64encode(kubeconfig).decode()},
            }
        )
        source = {"kubeConfig": {"locationType": "Secret", "location": f"{name}-kubeconfig"}}
        cluster = {"apiVersion": KUEUE, "kind": "MultiKueueCluster", "metadata": {"name": name}}
        objects.append({**cluster, "spec": {"clusterSource": source}})
    config = {"apiVersion": KUEUE, "kind": "MultiKueueConfig", "metadata": {"name": CHECK}}
    objects.append({**config, "spec": {"clusters": list(kubeconfigs)}})
    parameters = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": CHECK}
    check = {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": CHECK}}
    objects.append({**check, "spec": {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": parameters}})
    return objects


def resource_key(manifest: Manifest) -> str:
    """The store key of a manifest's kind (``"kueue.x-k8s.io/v1beta2/clusterqueues"``, ``"v1/secrets"``)."""
    plural = {
        "Namespace": "namespaces",
        "Secret": "secrets",
        "ResourceFlavor": "resourceflavors",
        "ClusterQueue": "clusterqueues",
        "LocalQueue": "localqueues",
        "MultiKueueCluster": "multikueueclusters",
        "MultiKueueConfig": "multikueueconfigs",
        "AdmissionCheck": "admissionchecks",
    }[manifest["kind"]]
    return f"{manifest['apiVersion']}/{plural}"


def create(cluster: ClusterHarness, manifests: list[Manifest]) -> None:
    """Create ``manifests`` in an emulator, in order."""
    for manifest in manifests:
        cluster.create(resource_key(manifest), manifest, manifest["metadata"].get("namespace"))


def connect(
    manager: ClusterHarness,
    workers: Mapping[str, tuple[ClusterHarness, Quota]],
    *,
    manager_quota: Quota,
    queue: str = "team",
    namespace: str = "default",
) -> None:
    """Create the MultiKueue objects of the module docstring in emulators (``workers``: name ->
    (harness, quota)); their kubeconfigs are the workers' admins'."""
    for worker, quota in workers.values():
        create(worker, [flavor(), *queue_objects(quota, queue=queue, namespace=namespace)])
    namespace_object = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}
    kubeconfigs = {name: worker.kubeconfig_path.read_bytes() for name, (worker, _) in workers.items()}
    checked = queue_objects(manager_quota, queue=queue, namespace=namespace, admission_check=CHECK)
    create(manager, [namespace_object, *manager_objects(kubeconfigs), flavor(), *checked])


def queues(
    cluster: ClusterHarness, quota: Quota, *, queue: str, namespace: str, admission_check: str | None = None
) -> None:
    """Another ClusterQueue ``cq-<queue>`` and LocalQueue ``queue`` in an emulator already connected."""
    create(cluster, queue_objects(quota, queue=queue, namespace=namespace, admission_check=admission_check))


def cluster_condition(manager: ClusterHarness, name: str) -> Mapping[str, Any] | None:
    """The ``Active`` condition of MultiKueueCluster ``name`` on the manager, or ``None``."""
    for cluster in manager.objects(f"{KUEUE}/multikueueclusters", None):
        if cluster["metadata"]["name"] == name:
            return active_condition(cluster)
    return None


def active_condition(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``Active`` condition of a Kueue object (MultiKueueCluster, ClusterQueue, LocalQueue), or ``None``."""
    found = [item for item in (obj.get("status") or {}).get("conditions") or [] if item.get("type") == "Active"]
    return found[0] if found else None


def wait_until_active(manager: ClusterHarness, workers: Mapping[str, ClusterHarness], *, timeout: float = 30.0) -> None:
    """Until every MultiKueueCluster of ``workers`` reports ``Active=True`` on the manager and every
    ClusterQueue and LocalQueue of the manager and the workers is ``Active`` (raises on the timeout):
    Kueue activates the manager's ClusterQueue only once its MultiKueue AdmissionCheck is active, after
    the clusters, and until then its LocalQueue refuses Workloads (``ClusterQueueIsInactive``)."""
    eventually(
        lambda: not inactive(manager, workers) or None,
        timeout=timeout,
        what=f"MultiKueueClusters {sorted(workers)} and every queue of the three clusters to be Active",
    )


def inactive(manager: ClusterHarness, workers: Mapping[str, ClusterHarness]) -> list[str]:
    """What :func:`wait_until_active` still waits for: ``multikueuecluster/<name>`` and
    ``<place> <kind>/<name>: <status>`` of each queue whose ``Active`` condition is not ``True``."""
    waiting = [
        f"multikueuecluster/{name}"
        for name in workers
        if (cluster_condition(manager, name) or {}).get("status") != "True"
    ]
    for place, cluster in {"manager": manager, **workers}.items():
        for kind in QUEUE_KINDS:
            waiting += inactive_objects(place, kind, cluster.objects(f"{KUEUE}/{kind}", None))
    return waiting


def inactive_objects(place: str, kind: str, items: Iterable[Mapping[str, Any]]) -> list[str]:
    """``<place> <kind>/<name>: <status>`` of each of ``items`` whose ``Active`` condition is not ``True``."""
    states = {item["metadata"]["name"]: str((active_condition(item) or {}).get("status", "Unknown")) for item in items}
    return [f"{place} {kind}/{name}: {state}" for name, state in states.items() if state != "True"]

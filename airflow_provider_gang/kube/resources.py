"""The API kinds the provider talks to, and how their URLs are built.

A :class:`Resource` names a kind the way the REST API does (group, version, plural). URL layout follows
the Kubernetes API conventions: core kinds live under ``/api/v1``, every other group under
``/apis/<group>/<version>``, and namespaced objects under ``.../namespaces/<namespace>/<plural>``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True)
class Resource:
    """One API kind.

    Fields:
        group: API group, ``""`` for the core group.
        version: API version within the group.
        plural: lower-case plural used in URLs (``pods``, ``provisioningrequests``).
        kind: the ``kind`` field of the objects.
        namespaced: whether objects live in a namespace.
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``apiVersion`` of the objects: ``v1`` or ``<group>/<version>``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @functools.cached_property
    def key(self) -> str:
        """``<apiVersion>/<plural>``, the resource key used by the emulator's store and metrics (built
        once: every view of every waiting gang is a dict keyed by it)."""
        return f"{self.api_version}/{self.plural}"

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """URL path of the collection, or of one object (and optionally its subresource)."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced:
            if not namespace:
                raise ValueError(f"{self.kind} is namespaced: a namespace is required")
            prefix += f"/namespaces/{quote(namespace, safe='')}"
        path = f"{prefix}/{self.plural}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
            if subresource:
                path += f"/{subresource}"
        return path


PODS = Resource("", "v1", "pods", "Pod")
POD_TEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
SERVICES = Resource("", "v1", "services", "Service")
EVENTS = Resource("", "v1", "events", "Event")
JOBS = Resource("batch", "v1", "jobs", "Job")
PROVISIONING_REQUESTS = Resource("autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
ADMISSION_CHECKS = Resource("kueue.x-k8s.io", "v1beta2", "admissionchecks", "AdmissionCheck", namespaced=False)
"""Read by a kueue gang's precheck: whether its ClusterQueue dispatches through MultiKueue."""
POD_GROUPS = Resource("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup")
"""Kubernetes' own gang scheduling (KEP-4671), beta in v1.37 behind the ``GenericWorkload`` gate."""
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
"""Read by the optional checks (the precheck's zone warning, ``triggers.spot_nodes``) and by a gang
with a topology (``hooks.topology_reads``), so not among :data:`KNOWN`'s gang kinds."""
PODS_OF_EVERY_NAMESPACE = Resource("", "v1", "pods", "Pod", namespaced=False)
"""``/api/v1/pods``: the pods of every namespace, whose requests take room on the nodes a topology
gang is placed on (``hooks.topology_reads``); as a permission, ``list pods`` cluster-wide."""
RESOURCE_FLAVORS = Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False)
TOPOLOGIES = Resource("kueue.x-k8s.io", "v1beta2", "topologies", "Topology", namespaced=False)
"""Kueue's ResourceFlavors and Topologies (cluster-scoped): read by a kueue gang's precheck when it
has a topology (``hooks.topology_check``)."""
SELF_SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False
)

KNOWN = {
    resource.key: resource
    for resource in (
        PODS,
        POD_TEMPLATES,
        CONFIG_MAPS,
        SERVICES,
        EVENTS,
        JOBS,
        PROVISIONING_REQUESTS,
        WORKLOADS,
        POD_GROUPS,
        LOCAL_QUEUES,
        CLUSTER_QUEUES,
        ADMISSION_CHECKS,
    )
}


def by_key(key: str) -> Resource:
    """The known :class:`Resource` whose :attr:`Resource.key` is ``key`` (``KeyError`` if none)."""
    return KNOWN[key]

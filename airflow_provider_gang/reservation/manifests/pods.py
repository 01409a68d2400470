"""Member pods: the shared member template, launch pods, gated pods and Kueue pod-group pods.

:func:`member_template` is the single source of every scheduling-relevant field (resources,
zone, spot, a specific reservation, tolerations, the user's template). The PodTemplate that a ProvisioningRequest
references and every launch pod are built from it, so CA's scheduling simulation and the real pods
agree (the ProvisioningRequest proposal requires consuming pods to match the template).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from airflow_provider_gang.reservation import checkpoint, cloud, members, naming
from airflow_provider_gang.reservation.manifests import common, rank_env
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.topology import labels

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = labels.HOSTNAME
SPOT_NODE_SELECTOR = cloud.GKE.spot_node_selector
"""GKE's spot selector; every profile's own is ``CloudProfile.spot_node_selector`` (:mod:`reservation.cloud`)."""
NOT_SPOT = cloud.GKE.not_spot
"""On-demand members require nodes without the profile's spot label value: GKE does not taint spot node
pools by default, so leaving out the spot selector is not enough
(https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms#scheduling-workloads).
``NotIn`` also matches nodes without the label (``v1.NodeSelectorRequirement``)."""
SPOT_TOLERATION = cloud.GKE.spot_toleration
RESERVATION_LABEL = cloud.GKE.reservation_label
"""GKE's node label for the specific Compute Engine reservation a node consumes; a pod selecting it
lands only on that reservation's capacity, and GKE's autoscaler creates such nodes from it
(https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations)."""
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_POD_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_ROLE_HASH = "kueue.x-k8s.io/role-hash"


def _resources(container: dict[str, Any], spec: GangSpec) -> dict[str, Any]:
    resources = copy.deepcopy(container.get("resources") or {})
    requests, limits = dict(resources.get("requests") or {}), dict(resources.get("limits") or {})
    member = spec.resources
    if member.cpu is not None:
        requests["cpu"] = member.cpu
    if member.memory is not None:
        requests["memory"] = limits["memory"] = member.memory
    if member.gpus:
        # Extended resources must have request == limit; the scheduler counts the request.
        requests[member.gpu_resource] = limits[member.gpu_resource] = str(member.gpus)
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {**container, "resources": resources} if resources else container


def _place(pod_spec: dict[str, Any], spec: GangSpec) -> None:
    """Spot or on-demand, reservation and zone placement by the gang's cloud profile
    (:mod:`reservation.cloud`), and the topology domains the try's placement pins (a node selector
    for one domain, a required ``In`` for several: ``reservation.topology.pins``)."""
    selector = dict(pod_spec.get("nodeSelector") or {})
    profile = spec.cloud
    if spec.spot:
        selector.update(profile.spot_node_selector)
        toleration = profile.spot_toleration
        if toleration is not None:
            tolerations = list(pod_spec.get("tolerations") or [])
            if toleration not in tolerations:
                tolerations.append(toleration)
            pod_spec["tolerations"] = tolerations
    else:
        _require(pod_spec, profile.not_spot)
    if spec.reservation_name is not None and profile.reservation_label is not None:  # GangSpec refuses the rest
        _require(pod_spec, {"key": profile.reservation_label, "operator": "In", "values": [spec.reservation_name]})
    placement = spec.placement
    if placement is not None and len(placement.domains) == 1:
        selector[placement.label] = placement.domains[0]
    elif placement is not None:
        _require(pod_spec, placement.node_requirement())
    if spec.zone is not None and spec.strict_zone:
        selector[ZONE_LABEL] = spec.zone
    elif spec.zone is not None:
        affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        preferred = affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        expression = {"key": ZONE_LABEL, "operator": "In", "values": [spec.zone]}
        preferred.append({"weight": 100, "preference": {"matchExpressions": [expression]}})
    if selector:
        pod_spec["nodeSelector"] = selector


def _require(pod_spec: dict[str, Any], expression: dict[str, Any]) -> None:
    """AND ``expression`` into the required node affinity: terms are ORed, so it joins every term (or
    is the only term when the template has none)."""
    node_affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = list(required.get("nodeSelectorTerms") or [{}])
    required["nodeSelectorTerms"] = [
        {**term, "matchExpressions": [*(term.get("matchExpressions") or []), dict(expression)]}
        if dict(expression) not in (term.get("matchExpressions") or [])
        else term
        for term in terms
    ]


def member_template(spec: GangSpec) -> dict[str, Any]:
    """The PodTemplateSpec every member shares: the user's template with ``restartPolicy: Never``,
    the member resources on container 0, zone, spot and reservation placement, the checkpoint claim's
    volume (``reservation.checkpoint.mount``), and the gang's member labels (a spot member's also
    ``airflow-gang.io/spot=true``, which tells the run trigger it is on spot whatever the cloud)."""
    template = copy.deepcopy(dict(spec.pod_template))
    pod_spec: dict[str, Any] = template["spec"]
    pod_spec["restartPolicy"] = "Never"
    containers = list(pod_spec["containers"])
    containers[0] = _resources(dict(containers[0]), spec)
    pod_spec["containers"] = containers
    _place(pod_spec, spec)
    if spec.checkpoint is not None:
        checkpoint.mount(pod_spec, spec.checkpoint)
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **common.labels(spec, common.ROLE_MEMBER)}
    if spec.spot:
        metadata["labels"][members.SPOT_MEMBER_LABEL] = "true"
    return template


def _pod(spec: GangSpec, rank: int, owner_uid: str, *, master_address: str | None) -> dict[str, Any]:
    names = naming.GangNames(spec.name)
    template = member_template(spec)
    pod_spec = template["spec"]
    env = rank_env.rank_environment(spec, rank, master_address=master_address)
    pod_spec["containers"] = [rank_env.with_environment(container, env) for container in pod_spec["containers"]]
    pod_spec["hostname"] = names.member(rank)
    pod_spec["subdomain"] = names.service
    rank_label = {naming.RANK_LABEL: str(rank)}
    metadata = common.metadata(spec, names.member(rank), common.ROLE_MEMBER, owner_uid, **rank_label)
    metadata["labels"] = {**template["metadata"]["labels"], **metadata["labels"]}
    annotations = template["metadata"].get("annotations")
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def _consume(pod: dict[str, Any], spec: GangSpec) -> dict[str, Any]:
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[CONSUME_ANNOTATION] = naming.GangNames(spec.name).provisioning_request
    annotations[CLASS_ANNOTATION] = str(spec.provisioning_class)
    return pod


def launch_pod(
    spec: GangSpec, rank: int, *, owner_uid: str, master_address: str | None = None, host: str | None = None
) -> dict[str, Any]:
    """Member ``rank`` consuming the gang's ProvisioningRequest: both consume annotations (CA
    requires both, ``provisioningrequest/pods/pods.go``), rank environment, hostname/subdomain; with
    ``host``, pinned to the node of that ``kubernetes.io/hostname`` (``reservation.topology.ranks``)."""
    if not spec.mode.uses_provisioning_request:
        raise ValueError(f"launch_pod needs a ProvisioningRequest mode, not {spec.mode.value!r}")
    pod = _consume(_pod(spec, rank, owner_uid, master_address=master_address), spec)
    if host is not None:
        pod["spec"]["nodeSelector"] = {**(pod["spec"].get("nodeSelector") or {}), HOSTNAME_LABEL: host}
    return pod


def member_pod(spec: GangSpec, rank: int, *, owner_uid: str, master_address: str | None = None) -> dict[str, Any]:
    """Member ``rank`` consuming no ProvisioningRequest (``workload`` mode, :mod:`.pod_group`): rank
    environment, hostname/subdomain, placement."""
    return _pod(spec, rank, owner_uid, master_address=master_address)


def gated_pod(spec: GangSpec, rank: int, *, owner_uid: str, master_address: str | None = None) -> dict[str, Any]:
    """A launch pod held by the gang's scheduling gate (gates mode). Gates can only be set at
    creation and only removed later (KEP-3521), so it is created complete: annotations included."""
    pod = launch_pod(spec, rank, owner_uid=owner_uid, master_address=master_address)
    gates = list(pod["spec"].get("schedulingGates") or [])
    gates.append({"name": naming.GangNames(spec.name).scheduling_gate})
    pod["spec"]["schedulingGates"] = gates
    return pod


def release_gate_patch(pod: dict[str, Any], gate: str, *, host: str | None = None) -> list[dict[str, Any]]:
    """A JSON patch removing ``gate`` from ``pod`` (other gates, e.g. Kueue's, stay), guarded by a
    ``test`` so a concurrent change fails the patch instead of removing the wrong entry. Empty if
    the gate is already gone (releasing is idempotent). With ``host`` the same patch adds
    ``kubernetes.io/hostname: <host>`` to the pod's node selector, which a gated pod may gain
    (KEP-3838, https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/),
    as Kueue's TopologyUngater pins a pod when it ungates it."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    for index, entry in enumerate(gates):
        if entry.get("name") == gate:
            path = f"/spec/schedulingGates/{index}"
            return [{"op": "test", "path": path, "value": entry}, {"op": "remove", "path": path}, *_pin(pod, host)]
    return []


def _pin(pod: dict[str, Any], host: str | None) -> list[dict[str, Any]]:
    """The JSON patch operations adding ``kubernetes.io/hostname: host`` to ``pod``'s node selector."""
    if host is None:
        return []
    if not (pod.get("spec") or {}).get("nodeSelector"):
        return [{"op": "add", "path": "/spec/nodeSelector", "value": {HOSTNAME_LABEL: host}}]
    key = HOSTNAME_LABEL.replace("~", "~0").replace("/", "~1")
    return [{"op": "add", "path": f"/spec/nodeSelector/{key}", "value": host}]


def pod_group_pod(spec: GangSpec, rank: int, *, owner_uid: str, master_address: str | None = None) -> dict[str, Any]:
    """Member ``rank`` of a Kueue plain-pod group: queue-name and pod-group-name labels and the
    total-count annotation on every member (Kueue ``pkg/controller/jobs/pod``); Kueue's webhook
    adds its own admission gate and removes it when the group is admitted.

    Every member also carries the same ``kueue.x-k8s.io/role-hash``: Kueue groups pods into podSets
    by that hash, computing it when absent from the pod spec *and labels* (``getRoleHash``), so our
    per-rank label and env would otherwise make each member its own role (and more than 8 roles is
    an unretryable error)."""
    if spec.queue is None:
        raise ValueError("pod_group_pod needs spec.queue (reservation='kueue')")
    pod = _pod(spec, rank, owner_uid, master_address=master_address)
    pod["metadata"]["labels"][KUEUE_QUEUE_LABEL] = spec.queue
    pod["metadata"]["labels"][KUEUE_POD_GROUP_LABEL] = naming.GangNames(spec.name).pod_group
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[KUEUE_POD_GROUP_COUNT] = str(spec.size)
    annotations[KUEUE_ROLE_HASH] = naming.short_hash(json.dumps(member_template(spec), sort_keys=True))
    return pod

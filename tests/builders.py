"""Builders of test inputs: Kubernetes objects and the reservation core's specs and observations.

Every builder returns a new object (tests may mutate it) that the emulator's bundled schemas accept,
with the fewest fields the tests' cases need; options add one fact each (after Kueue's
``pkg/util/testing`` wrappers, https://github.com/kubernetes-sigs/kueue/tree/main/pkg/util/testing).

- Plain objects: :func:`pod`, :func:`config_map`, :func:`provisioning_request`, :func:`node` and the pod
  specs :func:`pod_spec` (resources only) and :func:`gpu_pod_spec` (a one-GPU trainer).
- Fluent objects of a gang, as the reservation core reads them: ``provreq().accepted().provisioned().obj()``,
  ``workload().admitted().obj()``, ``member(0).running().obj()``; and :func:`gang_spec`.
- Records: :func:`gang_event`, a trigger's event as the operator reads it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.records.events import EventTimings, GangEvent
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from airflow_provider_gang.reservation.timestamps import format_time

GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
"""The taint GKE puts on GPU nodes (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus)."""
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def pod(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
    image: str = "busybox:1.36",
    **metadata: Any,
) -> dict[str, Any]:
    """A Pod named ``name``: ``spec`` if given, else one container ``main`` running ``image``;
    ``labels`` and any other ``metadata`` fields (namespace, annotations, ownerReferences...) as given."""
    fields: dict[str, Any] = {"name": name, **metadata}
    if labels:
        fields["labels"] = dict(labels)
    body = copy.deepcopy(dict(spec)) if spec is not None else {"containers": [{"name": "main", "image": image}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": fields, "spec": body}


def pod_spec(*, cpu: str = "1", memory: str = "1Gi", gpus: int = 0, **extra: Any) -> dict[str, Any]:
    """A pod spec of one container ``main`` requesting ``cpu`` and ``memory`` (and ``gpus`` as limits)."""
    requests = {"cpu": cpu, "memory": memory}
    resources: dict[str, Any] = {"requests": requests}
    if gpus:
        resources["limits"] = {GPU: str(gpus)}
    return {"containers": [{"name": "main", "image": "busybox", "resources": resources}], **extra}


def gpu_pod_spec(**extra: Any) -> dict[str, Any]:
    """A trainer's pod spec: never restarted, tolerates :data:`GPU_TAINT`, one container ``worker``
    requesting 1 CPU, 1 Gi and one GPU."""
    resources = {"requests": {"cpu": "1", "memory": "1Gi", GPU: "1"}, "limits": {GPU: "1"}}
    container = {"name": "worker", "image": "registry.example/trainer:1.0", "resources": resources}
    return {"restartPolicy": "Never", "tolerations": [dict(GPU_TOLERATION)], "containers": [container], **extra}


def node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A Node whose capacity and allocatable are ``cpu``, ``memory``, 110 pods (and ``gpus``)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        capacity[GPU] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def config_map(name: str, data: Mapping[str, str] | None = None, **metadata: Any) -> dict[str, Any]:
    """A ConfigMap holding ``data`` (default ``{"k": "v"}``); any other ``metadata`` fields as given."""
    content = {"k": "v"} if data is None else dict(data)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **metadata}, "data": content}


def provisioning_request(name: str, *, count: int = 4, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A check-capacity ProvisioningRequest for ``count`` pods of the PodTemplate ``tpl``."""
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": metadata,
        "spec": {
            "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
            "podSets": [{"count": count, "podTemplateRef": {"name": "tpl"}}],
        },
    }


T0 = 1_780_000_000.0
"""An arbitrary fixed epoch second; tests express times as offsets from it."""


def stamp(offset: float) -> str:
    return format_time(T0 + offset)


class _Conditions:
    def __init__(self, obj: dict[str, Any]) -> None:
        self._obj = obj

    def condition(self, kind: str, status: str = "True", reason: str = "", message: str = "", at: float = 0):
        conditions = self._obj.setdefault("status", {}).setdefault("conditions", [])
        conditions[:] = [entry for entry in conditions if entry["type"] != kind]
        entry = {"type": kind, "status": status, "lastTransitionTime": stamp(at)}
        if reason:
            entry["reason"] = reason
        if message:
            entry["message"] = message
        conditions.append(entry)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)


class ProvisioningRequestBuilder(_Conditions):
    def __init__(self, name: str = "gang-t1-abc", namespace: str = "ml") -> None:
        super().__init__(
            {
                "apiVersion": "autoscaling.x-k8s.io/v1",
                "kind": "ProvisioningRequest",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                    "podSets": [{"podTemplateRef": {"name": name}, "count": 4}],
                },
            }
        )

    def accepted(self):
        return self.condition(
            "Accepted", reason="Accepted", message="ProvisioningRequest is accepted by ClusterAutoscaler"
        )

    def not_provisioned(self, reason: str = "CapacityIsNotFound"):
        return self.condition("Provisioned", "False", reason, "Capacity is not found, CA will try to find it later.")

    def provisioned(self, reason: str = "CapacityIsFound", at: float = 0):
        return self.condition("Provisioned", "True", reason, "Capacity is found in the cluster", at=at)

    def failed(self, reason: str = "Expired", message: str = "ProvisioningRequest is expired"):
        return self.condition("Failed", "True", reason, message)

    def booking_expired(self, reason: str = "CapacityReservationTimeExpired"):
        return self.condition("BookingExpired", "True", reason, "Capacity reservation time is expired")

    def revoked(self):
        return self.condition("CapacityRevoked", "True", "CapacityRevoked", "nodes reclaimed")


class WorkloadBuilder(_Conditions):
    def __init__(self, name: str = "job-gang-t1-abc-1a2b3", count: int = 4) -> None:
        super().__init__(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": count}]},
            }
        )

    def quota_reserved(self, count: int | None = None):
        self.condition("QuotaReserved", reason="QuotaReserved", message="Quota reserved in ClusterQueue cq")
        count = count if count is not None else self._obj["spec"]["podSets"][0]["count"]
        self._obj["status"]["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "count": count}],
        }
        return self

    def waiting_for_quota(self, reason: str = "Pending", message: str = "couldn't assign flavors to pod set main"):
        return self.condition("QuotaReserved", "False", reason, message)

    def admitted(self, count: int | None = None):
        self.quota_reserved(count)
        return self.condition("Admitted", reason="Admitted", message="The workload is admitted")

    def check(self, name: str, state: str, message: str = ""):
        checks = self._obj.setdefault("status", {}).setdefault("admissionChecks", [])
        checks.append({"name": name, "state": state, "message": message, "lastTransitionTime": stamp(0)})
        return self

    def evicted(self, reason: str = "PodsReadyTimeout"):
        return self.condition("Evicted", reason=reason, message=f"Evicted: {reason}")

    def preempted(self):
        return self.condition("Preempted", reason="InClusterQueue", message="Preempted to accommodate a workload")

    def inactive(self):
        self._obj["spec"]["active"] = False
        return self.evicted("Deactivated")

    def finished(self, reason: str = "Succeeded"):
        return self.condition("Finished", reason=reason, message="Job finished successfully")


class MemberPodBuilder(_Conditions):
    """A member pod of the gang ``gang`` (rank label ``rank`` unless None), Pending."""

    def __init__(self, rank: int | None = 0, gang: str = "gang-t1-abc") -> None:
        labels = {naming.GANG_LABEL: gang}
        if rank is not None:
            labels[naming.RANK_LABEL] = str(rank)
        super().__init__(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{gang}-{rank}", "namespace": "ml", "labels": labels},
                "spec": {"containers": [{"name": "worker", "image": "trainer:1"}]},
                "status": {"phase": "Pending"},
            }
        )

    def job_index(self, index: int, where: str = "labels"):
        self._obj["metadata"].setdefault(where, {})["batch.kubernetes.io/job-completion-index"] = str(index)
        return self

    def gated(self, gate: str):
        self._obj["spec"].setdefault("schedulingGates", []).append({"name": gate})
        return self

    def bound(self, node: str = "node-1"):
        self._obj["spec"]["nodeName"] = node
        return self

    def phase(self, phase: str, reason: str = "", message: str = ""):
        self._obj["status"]["phase"] = phase
        if reason:
            self._obj["status"]["reason"] = reason
        if message:
            self._obj["status"]["message"] = message
        return self

    def started(self, at: float = 0):
        self._obj["status"]["startTime"] = stamp(at)
        return self

    def running(self, at: float = 0):
        self.bound().started(at)
        return self.phase("Running")

    def terminated(self, exit_code: int, reason: str = "", at: float = 100, message: str = ""):
        state = {"exitCode": exit_code, "finishedAt": stamp(at)}
        if reason:
            state["reason"] = reason
        if message:
            state["message"] = message
        self._obj["status"].setdefault("containerStatuses", []).append(
            {"name": "worker", "state": {"terminated": state}}
        )
        return self

    def waiting(self, reason: str):
        self._obj["status"].setdefault("containerStatuses", []).append(
            {"name": "worker", "state": {"waiting": {"reason": reason, "message": f"{reason} happened"}}}
        )
        return self

    def succeeded(self, at: float = 100):
        self.running(0)
        self.terminated(0, "Completed", at)
        return self.phase("Succeeded")

    def failed(self, exit_code: int = 1, reason: str = "Error", at: float = 50):
        self.running(0)
        self.terminated(exit_code, reason, at)
        return self.phase("Failed")

    def terminating(self):
        self._obj["metadata"]["deletionTimestamp"] = stamp(60)
        return self

    def on_spot(self):
        self._obj["spec"].setdefault("nodeSelector", {})["cloud.google.com/gke-spot"] = "true"
        return self

    def container_running(self):
        self.running(0)
        self._obj["status"].setdefault("containerStatuses", []).append(
            {"name": "worker", "state": {"running": {"startedAt": stamp(0)}}}
        )
        return self

    def shutting_down(self):
        """The kubelet's graceful node shutdown started: DisruptionTarget, containers still running."""
        self.container_running()
        return self.condition(
            "DisruptionTarget",
            reason="TerminationByKubelet",
            message="Pod was terminated in response to imminent node shutdown.",
        )

    def shut_down(self, message: str = ""):
        """The graceful node shutdown ended the pod: Failed, reason Terminated, container terminated."""
        self.running(0)
        self.terminated(143, "Error", 40, message=message)
        self.condition("DisruptionTarget", reason="TerminationByKubelet")
        return self.phase("Failed", "Terminated", "Pod was terminated in response to imminent node shutdown.")


def provreq(name: str = "gang-t1-abc") -> ProvisioningRequestBuilder:
    return ProvisioningRequestBuilder(name)


def workload(count: int = 4) -> WorkloadBuilder:
    return WorkloadBuilder(count=count)


def member(rank: int | None = 0) -> MemberPodBuilder:
    return MemberPodBuilder(rank)


def template(**spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "worker", "image": "trainer:1"}], **spec}}


def gang_spec(**overrides: Any) -> GangSpec:
    """A valid spec (provisioning_request mode, 4 members) with ``overrides`` applied."""
    values: dict[str, Any] = {
        "name": "gang-t1-abc",
        "namespace": "ml",
        "size": 4,
        "pod_template": template(),
        "mode": ReservationMode.PROVISIONING_REQUEST,
        "provisioning_class": "check-capacity.autoscaling.x-k8s.io",
    }
    if overrides.get("mode") in ("kueue", ReservationMode.KUEUE):
        values.pop("provisioning_class")
        values["queue"] = "lq"
    if overrides.get("mode") in ("workload", ReservationMode.WORKLOAD):
        values.pop("provisioning_class")
    values.update(overrides)
    if "resources" not in values:
        values["resources"] = MemberResources(gpus=1)
    return GangSpec(**values)


def gang_event(reason: Reason, *, started_at: float, event_at: float, **fields: Any) -> GangEvent:
    """The event of a wait that ended with ``reason`` at ``event_at``: a reservation wait for
    ``reserved`` (and the reservation failures), a run wait otherwise; ``phases`` (first seen, UNIX
    seconds) and every other ``GangEvent`` field can be given."""
    stage = Stage.RESERVATION if reason is Reason.RESERVED or "stage" in fields else Stage.RUN
    phase = {Reason.RESERVED: Phase.RESERVED, Reason.ALL_SUCCEEDED: Phase.SUCCEEDED}.get(reason, Phase.FAILED)
    phases = fields.pop("phases", {})
    values: dict[str, Any] = {
        "stage": stage,
        "gang_name": "gang-t1-abc",
        "namespace": "ml",
        "mode": ReservationMode.PROVISIONING_REQUEST,
        "phase": phase,
        "terminal": True,
        "reason": reason,
        "message": f"ended: {reason.value}",
        "timings": EventTimings(started_at, event_at, max(0.0, event_at - started_at), phases),
        **fields,
    }
    return GangEvent(**values)

"""Fluent builders for the objects the reservation core reads (after Kueue's ``pkg/util/testing``).

Each builder starts from a minimal valid object and each method adds one fact, so a test row reads
as the state it describes: ``provreq().accepted().provisioned().obj()``.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from airflow_provider_gang.reservation.timestamps import format_time

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


class PodBuilder(_Conditions):
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
            {"name": "worker", "state": {"running": {"startedAt": stamp(0)}}})
        return self

    def shutting_down(self):
        """The kubelet's graceful node shutdown started: DisruptionTarget, containers still running."""
        self.container_running()
        return self.condition("DisruptionTarget", reason="TerminationByKubelet",
                              message="Pod was terminated in response to imminent node shutdown.")

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


def pod(rank: int | None = 0) -> PodBuilder:
    return PodBuilder(rank)


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
    values.update(overrides)
    if "resources" not in values:
        values["resources"] = MemberResources(gpus=1)
    return GangSpec(**values)

"""Builders for trigger tests: a gang's objects created through the API, and the controllers' status
writes played by the test (as Kueue's integration tests do until simulated controllers run).

Objects come from ``reservation.manifests`` so they are what the operator creates; conditions are
written through the ``/status`` subresource with a merge patch, like a controller would.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import (
    CONFIG_MAPS,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
    WORKLOADS,
)
from airflow_provider_gang.reservation import clock, naming
from airflow_provider_gang.reservation.manifests import common, owner, pods, provisioning
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from airflow_provider_gang.triggers.base import GangTrigger
from gang_sim.testing.eventually import eventually_async

NAMESPACE = "default"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "busybox", "command": ["true"]}]}}


def gang_spec(
    mode: ReservationMode, *, name: str = "train-t1-0a1b2c3d", size: int = 8, min_size: int | None = None
) -> GangSpec:
    return GangSpec(
        name=name,
        namespace=NAMESPACE,
        size=size,
        min_size=min_size,
        pod_template=TEMPLATE,
        mode=mode,
        resources=MemberResources(gpus=1),
        provisioning_class=None if mode is ReservationMode.KUEUE else "queued-provisioning.gke.io",
        queue="gpu" if mode is ReservationMode.KUEUE else None,
    )


def condition(kind: str, status: str = "True", reason: str = "Test", message: str = "set by test") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


@dataclass
class Gang:
    """A gang's objects in the emulator, and the writes its controllers would make."""

    client: KubeClient
    spec: GangSpec
    owner_uid: str = ""
    workload_name: str = ""

    @property
    def names(self) -> naming.GangNames:
        return naming.GangNames(self.spec.name)

    async def create(self, *, members: bool = False) -> Gang:
        """Owner ConfigMap, then the reservation objects of the spec's mode (and members if asked)."""
        created = await self.client.create(CONFIG_MAPS, owner.owner_config_map(self.spec))
        self.owner_uid = created["metadata"]["uid"]
        mode = self.spec.mode
        if mode.uses_provisioning_request:
            await self.client.create(POD_TEMPLATES, provisioning.pod_template(self.spec, owner_uid=self.owner_uid))
            await self.client.create(
                PROVISIONING_REQUESTS, provisioning.provisioning_request(self.spec, owner_uid=self.owner_uid)
            )
        if mode is ReservationMode.GATES:
            for rank in range(self.spec.size):
                await self.client.create(PODS, pods.gated_pod(self.spec, rank, owner_uid=self.owner_uid))
        if mode is ReservationMode.KUEUE:
            await self.create_workload()
        if members:
            await self.launch_members()
        return self

    async def create_workload(self) -> None:
        """The Workload Kueue would create for the gang's Job (named ``job-<name>-<hash>``)."""
        self.workload_name = f"job-{self.spec.name}-{naming.short_hash(self.spec.name, length=5)}"
        pod_set: dict[str, Any] = {"name": "main", "count": self.spec.size, "template": pods.member_template(self.spec)}
        if self.spec.floor < self.spec.size:
            pod_set["minCount"] = self.spec.floor
        await self.client.create(
            WORKLOADS,
            {
                "apiVersion": WORKLOADS.api_version,
                "kind": "Workload",
                "metadata": {"name": self.workload_name, "labels": {JOB_UID_LABEL: self.owner_uid}},
                "spec": {"queueName": "gpu", "podSets": [pod_set]},
            },
        )

    async def launch_members(self) -> None:
        for rank in range(self.spec.size):
            body = (
                pods.launch_pod(self.spec, rank, owner_uid=self.owner_uid)
                if self.spec.mode.uses_provisioning_request
                else pods.pod_group_pod(self.spec, rank, owner_uid=self.owner_uid)
            )
            await self.client.create(PODS, body)

    # -- controllers' writes ------------------------------------------------------------------------

    async def set_request_conditions(self, *conditions: dict[str, Any]) -> None:
        await self.client.patch(
            PROVISIONING_REQUESTS,
            self.names.provisioning_request,
            {"status": {"conditions": list(conditions)}},
            subresource="status",
        )

    async def set_workload_status(self, status: dict[str, Any]) -> None:
        await self.client.patch(WORKLOADS, self.workload_name, {"status": status}, subresource="status")

    async def set_member_phase(self, rank: int, phase: str, *, exit_code: int | None = None, reason: str = "") -> None:
        state: dict[str, Any] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
        if exit_code is not None:
            state = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                    "finishedAt": "2026-01-01T00:10:00Z",
                }
            }
        status = {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "trainer",
                    "ready": phase == "Running",
                    "restartCount": 0,
                    "image": "busybox",
                    "imageID": "",
                    "state": state,
                }
            ],
        }
        await self.client.patch(PODS, self.names.member(rank), {"status": status}, subresource="status")

    # -- trigger arguments --------------------------------------------------------------------------

    def reservation_kwargs(self, connection: dict[str, Any], *, deadline_in: float = 30.0) -> dict[str, Any]:
        mode = self.spec.mode
        return {
            "connection": connection,
            "gang_name": self.spec.name,
            "namespace": NAMESPACE,
            "deadline": clock.current().now() + deadline_in,
            "mode": mode.value,
            "size": self.spec.size,
            "started_at": clock.current().now(),
            "provisioning_request": self.names.provisioning_request if mode.uses_provisioning_request else None,
            "workload_selector": f"{JOB_UID_LABEL}={self.owner_uid}" if mode is ReservationMode.KUEUE else None,
            "pod_selector": common.member_selector(self.spec) if mode is ReservationMode.GATES else None,
            "scheduling_gate": self.names.scheduling_gate if mode is ReservationMode.GATES else None,
            "delete_on_kill": [{"resource": CONFIG_MAPS.key, "name": self.names.owner}],
            "client_options": FAST_RETRIES,
        }

    def run_kwargs(self, connection: dict[str, Any], *, deadline_in: float = 30.0) -> dict[str, Any]:
        return {
            "connection": connection,
            "gang_name": self.spec.name,
            "namespace": NAMESPACE,
            "deadline": clock.current().now() + deadline_in,
            "mode": self.spec.mode.value,
            "size": self.spec.size,
            "started_at": clock.current().now(),
            "pod_selector": common.member_selector(self.spec),
            "provisioning_request": self.names.provisioning_request
            if self.spec.mode.uses_provisioning_request
            else None,
            "delete_on_kill": [
                {"resource": CONFIG_MAPS.key, "name": self.names.owner},
                {"resource": PODS.key, "label_selector": common.member_selector(self.spec)},
            ],
            "client_options": FAST_RETRIES,
        }


#: Short real backoff so fault storms finish quickly; the backoff curve itself is unit-tested.
FAST_RETRIES = {"request_timeout": 10.0, "retry_attempts": 8, "retry_base_delay": 0.01, "retry_max_delay": 0.05}


async def first_event(trigger: GangTrigger, timeout: float = 30.0) -> dict[str, Any]:
    """Run ``trigger`` until its first event; always runs ``cleanup()`` like the triggerer."""
    events = trigger.run()
    try:
        event = await asyncio.wait_for(anext(events), timeout)
        return dict(event.payload)
    finally:
        await events.aclose()
        await trigger.cleanup()


async def until_watching(trigger: GangTrigger, timeout: float = 10.0) -> None:
    """Wait until every reflector of a running ``trigger`` has listed and started watching.

    A write after this point reaches the trigger through its WATCH: the watch starts from the LIST's
    resourceVersion, so even a write made before the WATCH request arrives is replayed to it.
    """
    await eventually_async(
        lambda: trigger.reflectors and all(r.stats.watches >= 1 for r in trigger.reflectors),
        timeout=timeout,
        what="the trigger to start watching",
        interval=0.01,
    )


async def until_seen(trigger: GangTrigger, name: str, phase: str, timeout: float = 10.0) -> None:
    """Wait until the watches of a running ``trigger`` show the object ``name`` in ``phase``."""

    def seen() -> bool:
        found = [watched.reflector.objects.get(name) for watched in trigger.subscriptions]
        return any(((obj or {}).get("status") or {}).get("phase") == phase for obj in found)

    await eventually_async(seen, timeout=timeout, what=f"the trigger to see {name} {phase}")

"""The gangs ``bench/triggerer_load.py`` keeps waiting: their objects in the emulator, their triggers,
and the status write that grants each one.

A gang of :data:`GANG_SIZE` in mode ``provisioning_request`` is an owner ConfigMap, a PodTemplate
and a ProvisioningRequest without conditions; ``gates`` adds its gated member pods; ``kueue`` is an
owner ConfigMap and a Workload that is not admitted. The anchor (:data:`ANCHOR`) is 8 Pending pods
per gang, each watched by a cncf ``KubernetesPodTrigger``. Granting writes what the controllers
would: ``Provisioned=True``, ``QuotaReserved`` + ``Admitted``, or the anchor's pods ``Succeeded``.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CONFIG_MAPS, POD_TEMPLATES, PODS, PROVISIONING_REQUESTS, WORKLOADS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common, owner, pods, provisioning
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode

GANG_SIZE = 8
MODES = ("provisioning_request", "kueue", "gates")
ANCHOR = "anchor"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
TEMPLATE = {"spec": {"containers": [{"name": "base", "image": "busybox"}]}}
SETUP_IN_FLIGHT = 32


def spec_of(mode: str, index: int) -> GangSpec:
    reservation = ReservationMode(mode)
    return GangSpec(
        name=f"load{index:05d}-t1-00000000",
        namespace="default",
        size=GANG_SIZE,
        pod_template=TEMPLATE,
        mode=reservation,
        resources=MemberResources(gpus=1),
        provisioning_class=None if reservation is ReservationMode.KUEUE else "queued-provisioning.gke.io",
        queue="gpu" if reservation is ReservationMode.KUEUE else None,
    )


def condition(kind: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": "True",
        "reason": kind,
        "message": "granted by the benchmark",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


async def create_gang(client: KubeClient, mode: str, index: int) -> dict[str, Any]:
    """The objects a waiting gang of ``mode`` has; returns what its trigger needs to find them."""
    if mode == ANCHOR:
        for rank in range(GANG_SIZE):
            await client.create(
                PODS,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"kpo-{index}-{rank}"},
                    "spec": TEMPLATE["spec"],
                },
            )
        return {"index": index}
    spec = spec_of(mode, index)
    owner_uid = (await client.create(CONFIG_MAPS, owner.owner_config_map(spec)))["metadata"]["uid"]
    gang = {"index": index, "owner_uid": owner_uid, "workload": f"job-{spec.name}"}
    if spec.mode.uses_provisioning_request:
        await client.create(POD_TEMPLATES, provisioning.pod_template(spec, owner_uid=owner_uid))
        await client.create(PROVISIONING_REQUESTS, provisioning.provisioning_request(spec, owner_uid=owner_uid))
    if spec.mode is ReservationMode.GATES:
        for rank in range(GANG_SIZE):
            await client.create(PODS, pods.gated_pod(spec, rank, owner_uid=owner_uid))
    if spec.mode is ReservationMode.KUEUE:
        pod_set = {"name": "main", "count": GANG_SIZE, "template": pods.member_template(spec)}
        await client.create(
            WORKLOADS,
            {
                "apiVersion": WORKLOADS.api_version,
                "kind": "Workload",
                "metadata": {"name": gang["workload"], "labels": {JOB_UID_LABEL: owner_uid}},
                "spec": {"queueName": "gpu", "podSets": [pod_set]},
            },
        )
    return gang


async def create_gangs(kubeconfig: dict[str, Any], mode: str, count: int) -> list[dict[str, Any]]:
    limit = asyncio.Semaphore(SETUP_IN_FLIGHT)

    async def one(client: KubeClient, index: int) -> dict[str, Any]:
        async with limit:
            return await create_gang(client, mode, index)

    async with await KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig)) as client:
        return list(await asyncio.gather(*(one(client, index) for index in range(count))))


def build_triggers(mode: str, kubeconfig: dict[str, Any], gangs: list[dict[str, Any]]) -> list[Any]:
    """The triggers of ``gangs`` (Airflow is imported by the caller, before its RSS baseline)."""
    from airflow.providers.cncf.kubernetes.triggers.pod import KubernetesPodTrigger

    from airflow_provider_gang.triggers.reservation import ReservationTrigger

    connection = ConnectionSettings(kubeconfig=kubeconfig).to_dict()
    if mode == ANCHOR:
        return [
            KubernetesPodTrigger(
                pod_name=f"kpo-{gang['index']}-{rank}",
                pod_namespace="default",
                trigger_start_time=datetime.datetime.now(datetime.timezone.utc),
                base_container_name="base",
                kubernetes_conn_id=None,
                connection_extras={},
                config_dict=kubeconfig,
                get_logs=False,
                startup_timeout=3600,
                schedule_timeout=3600,
            )
            for gang in gangs
            for rank in range(GANG_SIZE)
        ]
    triggers = []
    for gang in gangs:
        spec = spec_of(mode, gang["index"])
        names = naming.GangNames(spec.name)
        triggers.append(
            ReservationTrigger(
                connection=connection,
                gang_name=spec.name,
                namespace="default",
                deadline=time.time() + 3600,
                mode=mode,
                size=GANG_SIZE,
                started_at=time.time(),
                provisioning_request=names.provisioning_request if spec.mode.uses_provisioning_request else None,
                workload_selector=f"{JOB_UID_LABEL}={gang['owner_uid']}"
                if spec.mode is ReservationMode.KUEUE
                else None,
                pod_selector=common.member_selector(spec) if spec.mode is ReservationMode.GATES else None,
                scheduling_gate=names.scheduling_gate if spec.mode is ReservationMode.GATES else None,
            )
        )
    return triggers


async def grant(client: KubeClient, mode: str, gang: dict[str, Any]) -> None:
    """What the controllers write when the gang's wait is over: its trigger reacts to this."""
    status: dict[str, Any]
    if mode == ANCHOR:
        status = {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": "base",
                    "ready": False,
                    "restartCount": 0,
                    "image": "busybox",
                    "imageID": "",
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
            ],
        }
        await asyncio.gather(
            *(
                client.patch(PODS, f"kpo-{gang['index']}-{rank}", {"status": status}, subresource="status")
                for rank in range(GANG_SIZE)
            )
        )
    elif mode == "kueue":
        admission = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": GANG_SIZE}]}
        status = {"conditions": [condition("QuotaReserved"), condition("Admitted")], "admission": admission}
        await client.patch(WORKLOADS, gang["workload"], {"status": status}, subresource="status")
    else:
        name = naming.GangNames(spec_of(mode, gang["index"]).name).provisioning_request
        status = {"conditions": [condition("Accepted"), condition("Provisioned")]}
        await client.patch(PROVISIONING_REQUESTS, name, {"status": status}, subresource="status")

"""Both triggers end to end on the emulator *with* its simulated control plane (autoscaler, scheduler,
kubelet) on a manual clock: nobody plays the controllers here. The ``small`` scenario's GPU pool has no
queued provisioning, so the gang uses ``best-effort-atomic-scale-up``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from airflow_provider_gang.hooks import creation
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CLUSTER_QUEUES, CONFIG_MAPS, JOBS, LOCAL_QUEUES, Resource
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation.manifests import kueue, owner
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from airflow_provider_gang.triggers.base import GangTrigger
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from gang_sim.testing import ClusterHarness
from gang_sim.world.scenario import load_scenario

from .gangs import NAMESPACE, Gang, first_event, until_watching

MEMBER = {
    "metadata": {"annotations": {"sim.gang.dev/run-seconds": "300"}},
    "spec": {
        "containers": [{"name": "trainer", "image": "busybox"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


@pytest.fixture
def cluster() -> Iterator[ClusterHarness]:
    with ClusterHarness(scenario=load_scenario("small"), seed=0) as harness:
        yield harness


@pytest.fixture
def connection(cluster: ClusterHarness) -> dict[str, Any]:
    return ConnectionSettings(kubeconfig=yaml.safe_load(cluster.kubeconfig_path.read_text())).to_dict()


async def event_after(cluster: ClusterHarness, trigger: GangTrigger, seconds: float) -> dict[str, Any]:
    """Start ``trigger``, let it watch, advance simulated time by ``seconds`` (off the test's loop, so
    the trigger keeps running meanwhile) and return its event."""
    waiting = asyncio.create_task(first_event(trigger))
    await until_watching(trigger)
    await asyncio.to_thread(cluster.advance, seconds)
    return await waiting


async def test_a_gang_is_provisioned_then_runs_to_success(cluster, connection):
    spec = GangSpec(
        name="e2e-t1-00000000",
        namespace=NAMESPACE,
        size=4,
        pod_template=MEMBER,
        mode=ReservationMode.PROVISIONING_REQUEST,
        resources=MemberResources(gpus=1),
        provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
    )
    async with await KubeClient.connect(ConnectionSettings.from_dict(connection)) as client:
        gang = await Gang(client, spec).create()
        # The autoscaler adds 4 GPU nodes (60 s each) and provisions.
        reservation = ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=60))
        reserved = await event_after(cluster, reservation, 600)
        assert (reserved["phase"], reserved["reason"]) == ("reserved", "reserved"), reserved["message"]

        await gang.launch_members()
        # Scheduled onto the booked nodes, started, 300 s of training.
        run = GangRunTrigger(**gang.run_kwargs(connection, deadline_in=60))
        finished = await event_after(cluster, run, 600)
    assert (finished["phase"], finished["reason"]) == ("succeeded", "all_succeeded"), finished["message"]
    assert len({member["node"] for member in finished["members"]}) == 4  # one 1-GPU node per member


KUEUE_API = "kueue.x-k8s.io", "v1beta2"
RESOURCE_FLAVORS = Resource(*KUEUE_API, "resourceflavors", "ResourceFlavor", namespaced=False)


async def kueue_with_gpu_quota(client: KubeClient, gpus: int) -> None:
    """One flavor for the GPU pool, a ClusterQueue with ``gpus`` of quota and LocalQueue ``gpu``."""
    kueue = "/".join(KUEUE_API)
    await client.create(
        RESOURCE_FLAVORS,
        {
            "apiVersion": kueue,
            "kind": "ResourceFlavor",
            "metadata": {"name": "l4"},
            "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "gpu"}},
        },
    )
    quota = [
        {"name": "cpu", "nominalQuota": "100"},
        {"name": "memory", "nominalQuota": "400Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)},
    ]
    await client.create(
        CLUSTER_QUEUES,
        {
            "apiVersion": kueue,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [{"name": "l4", "resources": quota}],
                    }
                ],
            },
        },
    )
    await client.create(
        LOCAL_QUEUES,
        {"apiVersion": kueue, "kind": "LocalQueue", "metadata": {"name": "gpu"}, "spec": {"clusterQueue": "cq"}},
    )


async def test_kueue_admits_part_of_a_gang_and_the_admitted_members_run(cluster, connection):
    spec = GangSpec(
        name="e2e-kueue-t1-00000000",
        namespace=NAMESPACE,
        size=4,
        min_size=2,
        pod_template=MEMBER,
        mode=ReservationMode.KUEUE,
        resources=MemberResources(gpus=1),
        queue="gpu",
    )
    async with await KubeClient.connect(ConnectionSettings.from_dict(connection)) as client:
        await kueue_with_gpu_quota(client, gpus=3)
        owner_uid = (await client.create(CONFIG_MAPS, owner.owner_config_map(spec)))["metadata"]["uid"]
        job = await client.create(JOBS, kueue.job(spec, owner_uid=owner_uid))
        kwargs = Gang(client, spec, owner_uid=owner_uid).reservation_kwargs(connection, deadline_in=60)
        kwargs["workload_selector"] = f"kueue.x-k8s.io/job-uid={job['metadata']['uid']}"
        # Kueue creates the Workload and admits 3 of 4 (quota), >= min 2.
        reserved = await event_after(cluster, ReservationTrigger(**kwargs), 5)
        assert (reserved["phase"], reserved["reason"], reserved["admitted_count"]) == ("reserved", "reserved", 3)
        # What the operator does on admission: tell the members how many they are (manifests.world).
        await creation.publish_world(client, spec, size=3, owner_uid=owner_uid)

        run_kwargs = Gang(client, spec, owner_uid=owner_uid).run_kwargs(connection, deadline_in=60)
        run_kwargs.update(size=3, workload_selector=kwargs["workload_selector"], provisioning_request=None)
        # The Job creates 3 pods, the autoscaler adds nodes, 300 s of work.
        finished = await event_after(cluster, GangRunTrigger(**run_kwargs), 900)
    assert (finished["phase"], finished["reason"]) == ("succeeded", "all_succeeded"), finished["message"]
    assert len(finished["members"]) == 3

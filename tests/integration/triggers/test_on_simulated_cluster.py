"""Both triggers end to end on the emulator *with* its simulated control plane (autoscaler, scheduler,
kubelet) on a manual clock: nobody plays the controllers here. The ``small`` scenario's GPU pool has no
queued provisioning, so the gang uses ``best-effort-atomic-scale-up``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from airflow_provider_gang.sim.controllers.cluster_harness import SimulatedClusterHarness
from airflow_provider_gang.sim.scenario import load_scenario
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.reservation import ReservationTrigger

from .gangs import NAMESPACE, Gang, first_event, until_watching

MEMBER = {
    "metadata": {"annotations": {"sim.gang.dev/run-seconds": "300"}},
    "spec": {
        "containers": [{"name": "trainer", "image": "busybox"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


@pytest.fixture
def cluster() -> Iterator[SimulatedClusterHarness]:
    with SimulatedClusterHarness(scenario=load_scenario("small"), seed=0) as harness:
        yield harness


async def advance(cluster: SimulatedClusterHarness, seconds: float) -> None:
    """Advance simulated time off the test's loop, so the triggers keep running meanwhile."""
    await asyncio.to_thread(cluster.advance, seconds)


async def test_a_gang_is_provisioned_then_runs_to_success(cluster):
    connection = ConnectionSettings(kubeconfig=yaml.safe_load(cluster.kubeconfig_path.read_text())).to_dict()
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
        reservation = ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=60))
        waiting = asyncio.create_task(first_event(reservation))
        await until_watching(reservation)
        await advance(cluster, 600)  # the autoscaler adds 4 GPU nodes (60 s each) and provisions
        reserved = await waiting
        assert (reserved["phase"], reserved["reason"]) == ("reserved", "reserved"), reserved["message"]

        await gang.launch_members()
        run = GangRunTrigger(**gang.run_kwargs(connection, deadline_in=60))
        running = asyncio.create_task(first_event(run))
        await until_watching(run)
        await advance(cluster, 600)  # scheduled onto the booked nodes, started, 300 s of training
        finished = await running
    assert (finished["phase"], finished["reason"]) == ("succeeded", "all_succeeded"), finished["message"]
    assert len({member["node"] for member in finished["members"]}) == 4  # one 1-GPU node per member

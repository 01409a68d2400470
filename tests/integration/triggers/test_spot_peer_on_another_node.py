"""GangRunTrigger on a spot gang whose two ranks run on two spot nodes, on the emulator with its
simulated control plane (autoscaler, scheduler, kubelet) and a manual clock: only rank 1's node is
preempted, and rank 0, on the node that stays, fails with exit code 1 afterwards, as a DDP peer does
when the rendezvous breaks. The try ends ``spot_preempted``, not ``member_failed``.

The emulator's kubelet reports the shutdown as upstream does (``mergePodStatus`` in
``pkg/kubelet/status/status_manager.go``): ``DisruptionTarget`` with the terminal phase, in one write
once the containers stopped. The peer's failure comes later: its process only notices the broken
rendezvous once the preempted rank's process is gone."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation.manifests import pods
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from airflow_provider_gang.sim.controllers.cluster_harness import SimulatedClusterHarness
from airflow_provider_gang.sim.scenario import parse_scenario
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.reservation import ReservationTrigger

from .gangs import NAMESPACE, Gang, first_event, until_watching

SCENARIO = {
    "name": "two-spot-nodes",
    "nodePools": [
        {"name": "cpu", "zone": "us-central1-a", "cpu": "8", "memory": "32Gi", "initialNodes": 1, "maxNodes": 1},
        {"name": "l4-spot", "zone": "us-central1-a", "gpuType": "nvidia-l4", "gpusPerNode": 1, "cpu": "8",
         "memory": "32Gi", "spot": True, "maxNodes": 2, "provisioningDelaySeconds": 60,
         "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
    ],
}
TEMPLATE = {
    "spec": {
        "containers": [{"name": "trainer", "image": "busybox"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}
PEER_FAILS_AFTER = 40
"""Simulated seconds rank 0 runs before it exits 1: after rank 1's node is preempted (at 10 s)."""


@pytest.fixture
def cluster() -> Iterator[SimulatedClusterHarness]:
    with SimulatedClusterHarness(scenario=parse_scenario(SCENARIO), seed=0) as harness:
        yield harness


@pytest.fixture
def connection(cluster: SimulatedClusterHarness) -> dict[str, Any]:
    return ConnectionSettings(kubeconfig=yaml.safe_load(cluster.kubeconfig_path.read_text())).to_dict()


def member(spec: GangSpec, rank: int, owner_uid: str) -> dict[str, Any]:
    """Rank 0 exits 1 after :data:`PEER_FAILS_AFTER` seconds (its peer is gone); rank 1 runs on."""
    body = pods.launch_pod(spec, rank, owner_uid=owner_uid)
    annotations = body["metadata"].setdefault("annotations", {})
    annotations["sim.gang.dev/run-seconds"] = str(PEER_FAILS_AFTER if rank == 0 else 3600)
    annotations["sim.gang.dev/exit-code"] = "1" if rank == 0 else "0"
    return body


def preempt_rank_1_then_let_rank_0_fail(cluster: SimulatedClusterHarness, nodes: dict[int, str]) -> None:
    """Off the test's loop: both ranks start, rank 1's node gets its termination notice at 10 s of
    the run, and time runs on past rank 0's failure at :data:`PEER_FAILS_AFTER` s."""
    cluster.advance(10)
    store = cluster.store
    pods_now = {item["metadata"]["name"]: item for item in cluster.run(lambda: store.list("v1/pods")[0])}
    for rank in (0, 1):
        nodes[rank] = pods_now[f"two-spot-t1-00000000-{rank}"]["spec"]["nodeName"]
    cluster.preempt(nodes[1], notice_seconds=60, pod_grace_period_seconds=15)  # the node outlives the test
    cluster.advance(PEER_FAILS_AFTER)


async def reserve_and_launch(client: KubeClient, cluster: SimulatedClusterHarness, connection: dict[str, Any]
                             ) -> Gang:
    """The gang reserved (the autoscaler adds one spot node per rank) and its two members created."""
    spec = dataclasses.replace(
        GangSpec(name="two-spot-t1-00000000", namespace=NAMESPACE, size=2, pod_template=TEMPLATE,
                 mode=ReservationMode.PROVISIONING_REQUEST, resources=MemberResources(gpus=1),
                 provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io"),
        spot=True,
    )
    gang = await Gang(client, spec).create()
    reservation = ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=60))
    waiting = asyncio.create_task(first_event(reservation))
    await until_watching(reservation)
    await asyncio.to_thread(cluster.advance, 600)
    reserved = await waiting
    assert (reserved["phase"], reserved["reason"]) == ("reserved", "reserved"), reserved["message"]
    for rank in range(spec.size):
        await client.create(PODS, member(spec, rank, gang.owner_uid))
    return gang


def assert_spot_preempted(event: dict[str, Any], nodes: dict[int, str]) -> None:
    assert nodes[0] != nodes[1], nodes  # one rank per spot node: only rank 1's node was preempted
    assert (event["phase"], event["reason"]) == ("failed", "spot_preempted"), event["message"]
    assert "1 of 2 lost to spot preemption: rank 1 " in event["message"]
    assert {member["rank"]: member["node"] for member in event["members"]} == nodes


async def test_a_peer_failing_after_its_partner_node_was_preempted_ends_the_try_spot_preempted(cluster, connection):
    async with await KubeClient.connect(ConnectionSettings.from_dict(connection)) as client:
        gang = await reserve_and_launch(client, cluster, connection)
        run = GangRunTrigger(**gang.run_kwargs(connection, deadline_in=60))
        ended = asyncio.create_task(first_event(run))
        await until_watching(run)
        nodes: dict[int, str] = {}
        await asyncio.to_thread(preempt_rank_1_then_let_rank_0_fail, cluster, nodes)
        event = await ended
        peer = await client.get(PODS, gang.names.member(0))
    assert_spot_preempted(event, nodes)
    # the peer did fail afterwards, on the node that stayed, with its own exit code
    terminated = peer["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (peer["status"]["phase"], terminated["exitCode"], peer["spec"]["nodeName"]) == ("Failed", 1, nodes[0])


async def test_a_trigger_that_first_sees_both_the_preemption_and_the_peer_failure_says_spot_preempted(
        cluster, connection):
    # a triggerer that restarts during the preemption: its first LIST already shows rank 0 failed
    async with await KubeClient.connect(ConnectionSettings.from_dict(connection)) as client:
        gang = await reserve_and_launch(client, cluster, connection)
        nodes: dict[int, str] = {}
        await asyncio.to_thread(preempt_rank_1_then_let_rank_0_fail, cluster, nodes)
        peer = await client.get(PODS, gang.names.member(0))
        assert peer["status"]["phase"] == "Failed"
        event = await first_event(GangRunTrigger(**gang.run_kwargs(connection, deadline_in=60)))
    assert_spot_preempted(event, nodes)

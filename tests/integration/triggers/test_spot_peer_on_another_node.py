"""GangRunTrigger on a spot gang whose two ranks run on two spot nodes, on the emulator with its
simulated control plane (autoscaler, scheduler, kubelet) and a manual clock: only rank 1's node is
preempted, and rank 0, on the node that stays, fails with exit code 1 afterwards, as a DDP peer does
when the rendezvous breaks. The try ends ``spot_preempted``, not ``member_failed``.

The emulator's kubelet reports the shutdown as upstream does (``mergePodStatus`` in
``pkg/kubelet/status/status_manager.go``): ``DisruptionTarget`` with the terminal phase, in one write
once the containers stopped. The peer may fail after that write, or during the preempted rank's
grace period, before it: then only the node's termination taint tells (``triggers.spot_nodes``), and
the trigger reads it before deciding."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
import structlog
import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import cloud
from airflow_provider_gang.reservation.cloud import CloudProfile
from airflow_provider_gang.reservation.manifests import pods
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually, eventually_async
from gang_sim.world.scenario import parse_scenario

from .gangs import NAMESPACE, Gang, first_event, until_watching

SCENARIO = {
    "name": "two-spot-nodes",
    "localProcessImages": ["python:*"],
    "nodePools": [
        {"name": "cpu", "zone": "us-central1-a", "cpu": "8", "memory": "32Gi", "initialNodes": 1, "maxNodes": 1},
        {
            "name": "l4-spot",
            "zone": "us-central1-a",
            "gpuType": "nvidia-l4",
            "gpusPerNode": 1,
            "cpu": "8",
            "memory": "32Gi",
            "spot": True,
            "maxNodes": 2,
            "provisioningDelaySeconds": 60,
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        },
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
def cluster() -> Iterator[ClusterHarness]:
    with ClusterHarness(scenario=parse_scenario(SCENARIO), seed=0) as harness:
        yield harness


@pytest.fixture
def connection(cluster: ClusterHarness) -> dict[str, Any]:
    return ConnectionSettings(kubeconfig=yaml.safe_load(cluster.kubeconfig_path.read_text())).to_dict()


IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(3600)"
)
PEER_FAILS_IN_GRACE = 15
"""Simulated seconds rank 0 runs before it exits 1 in the other test: within rank 1's grace period
(its node noticed at 10 s, its pod stopped at 25 s)."""


def member(spec: GangSpec, rank: int, owner_uid: str, peer_fails_after: int) -> dict[str, Any]:
    """Rank 0 exits 1 after ``peer_fails_after`` seconds (its peer is gone); rank 1 runs on."""
    body = pods.launch_pod(spec, rank, owner_uid=owner_uid)
    annotations = body["metadata"].setdefault("annotations", {})
    annotations["sim.gang.dev/run-seconds"] = str(peer_fails_after if rank == 0 else 3600)
    annotations["sim.gang.dev/exit-code"] = "1" if rank == 0 else "0"
    if rank == 1 and peer_fails_after == PEER_FAILS_IN_GRACE:
        # a local process that ignores SIGTERM: it stops only when its grace period runs out (SIGKILL)
        body["spec"]["containers"][0].update(image="python:3.11-slim", command=["python", "-c", IGNORES_SIGTERM])
    return body


def wait_until_ready(cluster: ClusterHarness, pod: str) -> None:
    """Until the local process of ``pod`` has printed ``ready`` (its SIGTERM handler is set)."""
    core = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(cluster.kubeconfig_path)))

    def printed_ready() -> bool:
        try:
            return "ready" in core.read_namespaced_pod_log(pod, NAMESPACE)
        except kubernetes.client.ApiException as error:  # 400 while its container is being created
            assert error.status == 400, error
            return False

    eventually(printed_ready, timeout=20.0, what=f"{pod} to print ready")


def preempt_rank_1(cluster: ClusterHarness, nodes: dict[int, str], *, local_rank_1: bool = False) -> None:
    """Off the test's loop: both ranks start and rank 1's node gets its termination notice at 10 s
    of the run, with 15 s of grace for its pod (a local process: once it is ready); ``nodes`` gets
    each rank's node."""
    cluster.advance(10)
    if local_rank_1:
        wait_until_ready(cluster, "two-spot-t1-00000000-1")
    store = cluster.store
    pods_now = {item["metadata"]["name"]: item for item in cluster.run(lambda: store.list("v1/pods")[0])}
    for rank in (0, 1):
        nodes[rank] = pods_now[f"two-spot-t1-00000000-{rank}"]["spec"]["nodeName"]
    cluster.preempt(nodes[1], notice_seconds=60, pod_grace_period_seconds=15)  # the node outlives the test


def preempt_rank_1_then_let_rank_0_fail(cluster: ClusterHarness, nodes: dict[int, str]) -> None:
    """:func:`preempt_rank_1`, then time runs on past rank 0's failure at :data:`PEER_FAILS_AFTER` s."""
    preempt_rank_1(cluster, nodes)
    cluster.advance(PEER_FAILS_AFTER)


async def reserve_and_launch(
    client: KubeClient,
    cluster: ClusterHarness,
    connection: dict[str, Any],
    peer_fails_after: int = PEER_FAILS_AFTER,
    profile: CloudProfile = cloud.GKE,
) -> Gang:
    """The gang reserved (the autoscaler adds one spot node per rank) and its two members created."""
    spec = dataclasses.replace(
        GangSpec(
            name="two-spot-t1-00000000",
            namespace=NAMESPACE,
            size=2,
            pod_template=TEMPLATE,
            mode=ReservationMode.PROVISIONING_REQUEST,
            resources=MemberResources(gpus=1),
            provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        ),
        spot=True,
        cloud=profile,
    )
    gang = await Gang(client, spec).create()
    reservation = ReservationTrigger(**gang.reservation_kwargs(connection, deadline_in=60))
    waiting = asyncio.create_task(first_event(reservation))
    await until_watching(reservation)
    await asyncio.to_thread(cluster.advance, 600)
    reserved = await waiting
    assert (reserved["phase"], reserved["reason"]) == ("reserved", "reserved"), reserved["message"]
    for rank in range(spec.size):
        await client.create(PODS, member(spec, rank, gang.owner_uid, peer_fails_after))
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
    cluster, connection
):
    # a triggerer that restarts during the preemption: its first LIST already shows rank 0 failed
    async with await KubeClient.connect(ConnectionSettings.from_dict(connection)) as client:
        gang = await reserve_and_launch(client, cluster, connection)
        nodes: dict[int, str] = {}
        await asyncio.to_thread(preempt_rank_1_then_let_rank_0_fail, cluster, nodes)
        peer = await client.get(PODS, gang.names.member(0))
        assert peer["status"]["phase"] == "Failed"
        event = await first_event(GangRunTrigger(**gang.run_kwargs(connection, deadline_in=60)))
    assert_spot_preempted(event, nodes)


def node_reads(cluster: ClusterHarness) -> list[str]:
    """Names of the nodes read (GET) so far, from the emulator's request log."""
    entries = cluster.run(lambda: cluster.emulator.context.requests.snapshot())
    return [entry["name"] for entry in entries if (entry["verb"], entry["resource"]) == ("get", "nodes")]


async def peer_fails_in_grace(
    cluster: ClusterHarness, connection: dict[str, Any], *, node_faults: str = "", profile: CloudProfile = cloud.GKE
) -> tuple[dict[str, Any], dict[int, str], bool]:
    """Rank 0 fails at 15 s, while rank 1's pod on the noticed node still stops (until 25 s) and looks
    Running; ``node_faults`` (``gang_sim.apiserver.http.faults`` items) are injected for the trigger's node reads.
    Returns the run trigger's event, each rank's node, and whether the event came before 25 s
    (waited for up to 30 s with faults, else for 0.5 s once the trigger has read the nodes)."""
    async with await KubeClient.connect(ConnectionSettings.from_dict(connection)) as client:
        gang = await reserve_and_launch(
            client, cluster, connection, peer_fails_after=PEER_FAILS_IN_GRACE, profile=profile
        )
        if node_faults:
            faults = Faults.parse(node_faults)
            cluster.run(lambda: setattr(cluster.emulator.context, "faults", faults))
        kwargs = {**gang.run_kwargs(connection, deadline_in=60), "preemption_taints": list(profile.preemption_taints)}
        run = GangRunTrigger(**kwargs)
        ended = asyncio.create_task(first_event(run))
        await until_watching(run)
        nodes: dict[int, str] = {}
        await asyncio.to_thread(preempt_rank_1, cluster, nodes, local_rank_1=True)
        await asyncio.to_thread(cluster.advance, PEER_FAILS_IN_GRACE - 10 + 4)  # past its start-up, before 25 s
        peer = await client.get(PODS, gang.names.member(0))
        assert peer["status"]["phase"] == "Failed"
        # Until the trigger has read the nodes (decided by requests, not by time).
        await eventually_async(
            lambda: set(nodes.values()) <= set(node_reads(cluster)) or ended.done(),
            timeout=10.0,
            what="the trigger to read both nodes",
        )
        await asyncio.wait([ended], timeout=30 if node_faults else 0.5)
        early = ended.done()
        await asyncio.to_thread(cluster.advance, 20)  # rank 1's containers stop: its shutdown status
        return await ended, nodes, early


async def test_a_peer_failing_while_its_partner_node_shuts_down_waits_for_it_and_ends_spot_preempted(
    cluster, connection
):
    """The trigger reads each spot node of the gang once, finds rank 1's with the termination taint,
    and waits for rank 1's containers to stop."""
    event, nodes, early = await peer_fails_in_grace(cluster, connection)
    assert not early, event["message"]
    assert_spot_preempted(event, nodes)
    assert sorted(node_reads(cluster)) == sorted(nodes.values())


async def test_node_reads_failing_past_their_retries_leave_the_decision_to_the_pods(cluster, connection):
    """``get nodes`` answered 503 past the client's retries (or refused without the RBAC rule): the
    trigger warns and decides on the pods alone, as before it could read nodes."""
    with structlog.testing.capture_logs() as logged:
        event, _, early = await peer_fails_in_grace(cluster, connection, node_faults="get/nodes:1.0:503")
    assert early and (event["phase"], event["reason"]) == ("failed", "member_failed"), event["message"]
    assert any("could not read its spot nodes" in str(entry["event"]) for entry in logged), logged


@pytest.mark.parametrize("profile", [cloud.EKS, cloud.KARPENTER], ids=["eks", "karpenter"])
async def test_each_clouds_reclaim_taint_is_read_while_the_partner_node_shuts_down(profile: CloudProfile) -> None:
    """As above on an EKS (Node Termination Handler) or Karpenter cluster: the trigger reads the
    node's taint of the gang's profile, ``aws-node-termination-handler/spot-itn`` or
    ``karpenter.sh/disrupted``, and waits for rank 1 instead of ending ``member_failed``."""
    with ClusterHarness(scenario=parse_scenario({**SCENARIO, "cloud": profile.name}), seed=0) as harness:
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text())).to_dict()
        event, nodes, early = await peer_fails_in_grace(harness, settings, profile=profile)
    assert not early, event["message"]
    assert_spot_preempted(event, nodes)


async def test_another_clouds_reclaim_taint_is_not_taken_for_this_ones() -> None:
    """The control: a Karpenter cluster read with GKE's profile finds no taint it knows on the
    noticed node, so the peer's failure decides (``member_failed``) before rank 1 stops."""
    with ClusterHarness(scenario=parse_scenario({**SCENARIO, "cloud": "karpenter"}), seed=0) as harness:
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text())).to_dict()
        mismatched = dataclasses.replace(cloud.GKE, spot_label="karpenter.sh/capacity-type", spot_value="spot")
        event, _, early = await peer_fails_in_grace(harness, settings, profile=mismatched)
    assert early and (event["phase"], event["reason"]) == ("failed", "member_failed"), event["message"]

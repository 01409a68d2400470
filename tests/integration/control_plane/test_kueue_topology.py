"""Kueue's Topology Aware Scheduling on the ``topology`` scenario, through the API (Kueue v0.17.0).

The scenario (``gang_sim/world/scenarios/topology.yaml``): racks rack-a1 (2 GPUs free, one per host),
rack-a2 (3 free on one host), rack-b1 (6 free: 2 + 4) and the autoscaled, empty rack-b2; queue
``tas`` has the TAS flavor, queue ``plain`` a flavor without topology. A Job's pods are placed by
the Workload's ``topologyAssignment`` and ungated with a hostname ``nodeSelector`` each, by
completion index; a PodSet no domain holds keeps its Job suspended with Kueue's message.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from gang_sim.controllers.kueue import tas
from gang_sim.testing.pytest_plugin import SimCluster
from gang_sim.world.node_topology import BLOCK_LABEL, SUBBLOCK_LABEL
from tests.integration.control_plane import kueue_setup

HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture
def cluster(sim_cluster: Callable[..., SimCluster]) -> SimCluster:
    started = sim_cluster("topology")
    started.advance(10)  # the fillers are bound and running
    return started


def create_job(
    cluster: SimCluster, name: str, count: int, annotations: dict[str, str], *, queue: str = "tas", run: int = 600
) -> None:
    kueue_setup.create_job(cluster, name, count, run, queue=queue, template_annotations=annotations)


def workload_of(cluster: SimCluster, job: str) -> dict[str, Any]:
    (found,) = [item for item in cluster.workloads() if item["metadata"]["name"].startswith(f"job-{job}-")]
    return found


def quota_reserved(workload: dict[str, Any]) -> tuple[str, str, str]:
    (condition,) = [item for item in workload["status"]["conditions"] if item["type"] == "QuotaReserved"]
    return condition["status"], condition["reason"], condition["message"]


def racks_of(cluster: SimCluster, job: str) -> Counter[str]:
    """How many of the Job's pods are bound in each rack."""
    nodes = {node.metadata.name: node.metadata.labels for node in cluster.core.list_node().items}
    return Counter(
        nodes[pod.spec.node_name][SUBBLOCK_LABEL] for pod in cluster.pods(selector=f"gang={job}") if pod.spec.node_name
    )


def required_rack() -> dict[str, str]:
    return {tas.REQUIRED: SUBBLOCK_LABEL}


def test_a_gang_of_four_requiring_a_rack_lands_wholly_in_the_one_rack_that_holds_it(cluster: SimCluster) -> None:
    create_job(cluster, "four", 4, required_rack())
    cluster.advance(30)
    workload = workload_of(cluster, "four")
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"]["levels"] == [HOSTNAME]
    assert racks_of(cluster, "four") == {"rack-b1": 4}
    pods = cluster.pods(selector="gang=four")
    assert all(not pod.spec.scheduling_gates for pod in pods)
    assert all(pod.spec.node_selector[HOSTNAME] == pod.spec.node_name for pod in pods)
    assert {pod.metadata.annotations[tas.WORKLOAD_ANNOTATION] for pod in pods} == {workload["metadata"]["name"]}


def test_ranks_follow_the_assignment_so_consecutive_indices_share_a_host(cluster: SimCluster) -> None:
    create_job(cluster, "five", 5, required_rack())
    cluster.advance(30)
    (assignment,) = workload_of(cluster, "five")["status"]["admission"]["podSetAssignments"]
    ranks = [values[-1] for values, count in tas.domains_of(assignment["topologyAssignment"]) for _ in range(count)]
    by_index = {
        int(pod.metadata.labels[tas.JOB_INDEX_LABEL]): pod.spec.node_name for pod in cluster.pods(selector="gang=five")
    }
    assert [by_index[index] for index in range(5)] == ranks
    assert sorted(Counter(ranks).values()) == [1, 4]  # the full host of rack-b1 and one GPU of the other


def test_a_gang_no_rack_holds_stays_pending_with_kueues_message_and_no_member(cluster: SimCluster) -> None:
    create_job(cluster, "seven", 7, required_rack())
    cluster.advance(30)
    assert quota_reserved(workload_of(cluster, "seven")) == (
        "False",
        "WaitingForQuota",
        'couldn\'t assign flavors to pod set main: topology "gke-default" allows to fit only 6 out of 7 pod(s). '
        'Total nodes: 6; excluded: resource "nvidia.com/gpu": 1',
    )
    assert cluster.batch.read_namespaced_job("seven", "default").spec.suspend is True
    assert cluster.pods(selector="gang=seven") == []


def test_the_pending_gang_is_admitted_once_a_filler_leaves_its_rack(cluster: SimCluster) -> None:
    create_job(cluster, "seven", 7, required_rack())
    cluster.advance(30)
    cluster.core.delete_namespaced_pod("fill-b1-0", "default")
    cluster.advance(30)
    assert racks_of(cluster, "seven") == {"rack-b1": 7}


def test_a_second_gang_waits_for_the_first_to_release_the_rack(cluster: SimCluster) -> None:
    create_job(cluster, "first", 4, required_rack(), run=120)
    cluster.advance(10)
    create_job(cluster, "second", 4, required_rack())
    cluster.advance(30)
    assert quota_reserved(workload_of(cluster, "second"))[:2] == ("False", "WaitingForQuota")
    cluster.advance(300)  # the first gang's members finish; its Workload gives the rack back
    assert racks_of(cluster, "second") == {"rack-b1": 4}


def test_a_preferred_rack_gang_too_big_for_a_block_spreads_over_both(cluster: SimCluster) -> None:
    create_job(cluster, "eight", 8, {tas.PREFERRED: SUBBLOCK_LABEL})
    cluster.advance(30)
    nodes = {node.metadata.name: node.metadata.labels for node in cluster.core.list_node().items}
    blocks = Counter(nodes[pod.spec.node_name][BLOCK_LABEL] for pod in cluster.pods(selector="gang=eight"))
    assert blocks == {"block-b": 6, "block-a": 2}


def test_a_queue_whose_flavor_has_no_topology_refuses_the_gang_naming_the_flavor(cluster: SimCluster) -> None:
    create_job(cluster, "plain", 2, required_rack(), queue="plain")
    cluster.advance(30)
    assert quota_reserved(workload_of(cluster, "plain")) == (
        "False",
        "NoMatchingFlavor",
        'couldn\'t assign flavors to pod set main: Flavor "gpu" does not support TopologyAwareScheduling',
    )


def test_a_gang_without_annotations_in_the_tas_queue_is_placed_unconstrained(cluster: SimCluster) -> None:
    create_job(cluster, "any", 2, {})
    cluster.advance(30)
    pods = cluster.pods(selector="gang=any")
    assert {pod.metadata.annotations.get(tas.UNCONSTRAINED) for pod in pods} == {"true"}
    assert racks_of(cluster, "any") == {"rack-b1": 2}  # the fullest host that holds both: rack-b1's half-full one


def test_a_job_with_contradicting_tas_annotations_is_refused_by_kueues_webhook_and_not_created(
    cluster: SimCluster,
) -> None:
    with pytest.raises(ApiException) as raised:
        create_job(cluster, "both", 2, {tas.REQUIRED: SUBBLOCK_LABEL, tas.PREFERRED: SUBBLOCK_LABEL})
    assert raised.value.status == 403
    body = json.loads(raised.value.body)
    assert body["reason"] == "Forbidden"
    assert body["message"].startswith('admission webhook "vjob.kb.io" denied the request: ')
    assert cluster.batch.list_namespaced_job("default").items == []


def test_the_apiservers_own_refusal_comes_before_the_webhooks(cluster: SimCluster) -> None:
    with pytest.raises(ApiException) as raised:
        create_job(cluster, "Bad_Name", 2, {tas.REQUIRED: SUBBLOCK_LABEL, tas.PREFERRED: SUBBLOCK_LABEL})
    assert raised.value.status == 422

"""Topology-aware gangs on the real control plane (Kueue 0.17's Topology Aware Scheduling, kube-scheduler
1.37, kwok nodes), on a cluster the test writes (``bench.topology_cluster.one_rack_document``: exactly
one rack, ``rack-y1``, can hold a gang of 4 one-GPU members; no rack one of 5): a gang of 4 with
``required_topology`` = rack lands wholly in ``rack-y1``, its ranks' domains recorded; a gang of 5
never has a member bound, and ``LoosenTopology`` to the block then runs it. The emulator twin is
``tests/e2e/test_topology.py``; the gang of 4 also runs in ``workload``, ``gates`` and
``provisioning_request`` modes here (the real scheduler, the real cluster-autoscaler).

Where the members were bound is read from every version of the gang's pods a watch saw
(:mod:`tests.real.recording`), and the racks from the nodes' labels.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.fallback import LoosenTopology
from bench.topology_cluster import BLOCK, ONE_RACK_FILLERS, RACK, one_rack_document, write
from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod, summary_of, task_instance
from tests.real.backends import RealBackend, real_backend, wait_for
from tests.real.recording import recording

pytestmark = pytest.mark.timeout(900)
GANG_KINDS = ("v1/pods", "v1/configmaps", "batch/v1/jobs", "scheduling.k8s.io/v1beta1/podgroups")


@pytest.fixture(scope="module")
def one_rack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealBackend]:
    path = write(tmp_path_factory.mktemp("topology") / "one-rack.yaml", one_rack_document())
    with real_backend(path) as backend:
        fillers = sum(len(held) for held in ONE_RACK_FILLERS.values())
        wait_for(
            lambda: (
                len(
                    [
                        pod
                        for pod in backend.objects("v1/pods", label_selector="app=filler")
                        if pod["spec"].get("nodeName")
                    ]
                )
                == fillers
            ),
            timeout=120,
            what="every filler pod bound",
        )
        yield backend


@pytest.fixture
def cluster(one_rack: RealBackend) -> Iterator[RealBackend]:
    yield one_rack
    wait_for(
        lambda: not any(one_rack.objects(kind, label_selector=naming.GANG_LABEL) for kind in GANG_KINDS),
        timeout=120,
        what="nothing of a gang left",
    )


def racks_bound(backend: RealBackend, pods: list[tuple[str, dict[str, Any]]], gang: str) -> dict[str, str]:
    """Pod name -> rack of every member of ``gang`` a watch saw bound (a Job's pods carry the gang label)."""
    labels = {node["metadata"]["name"]: node["metadata"].get("labels") or {} for node in backend.objects("v1/nodes")}
    bound = {
        obj["metadata"]["name"]: obj["spec"]["nodeName"]
        for _, obj in pods
        if obj["spec"].get("nodeName") and (obj["metadata"].get("labels") or {}).get(naming.GANG_LABEL) == gang
    }
    return {pod: labels.get(node, {}).get(RACK, "?") for pod, node in bound.items()}


def kueue_gang(dag_id: str, size: int, **arguments: Any) -> Any:
    options: dict[str, Any] = {
        "gpus": 1,
        "cpu": "1",
        "pod_template": simulated_pod(5),
        "reservation": "kueue",
        "kueue_queue": "tas",
        "required_topology": RACK,
        "deferrable": True,
        "reservation_timeout": timedelta(minutes=3),
        "startup_timeout": timedelta(minutes=2),
    }
    return gang_dag(dag_id, size=size, **{**options, **arguments})


def test_a_gang_of_4_lands_wholly_in_the_one_rack_that_holds_it(cluster: RealBackend) -> None:
    with recording(str(cluster.cluster.kubeconfig_path), "v1/pods") as seen:
        dag_run = run_dag_test(kueue_gang("real_topology_one_rack", 4))
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    racks = racks_bound(cluster, seen["v1/pods"].versions, summary["gang"])
    assert len(racks) == 4 and set(racks.values()) == {"rack-y1"}, racks
    assert summary["rank_domains"] == dict.fromkeys(["0", "1", "2", "3"], "rack-y1")


@pytest.mark.parametrize(
    "mode",
    [
        {"reservation": "workload"},
        {"reservation": "gates"},
        {"reservation": "provisioning_request"},
    ],
    ids=lambda mode: mode["reservation"],
)
def test_in_the_other_modes_too(cluster: RealBackend, mode: dict[str, str]) -> None:
    """The Workload API's topology constraint (the real kube-scheduler 1.37, gate on), and the domain the
    provider chooses and pins (the real cluster-autoscaler books it, the real scheduler binds)."""
    arguments = {**mode, "kueue_queue": None}
    with recording(str(cluster.cluster.kubeconfig_path), "v1/pods") as seen:
        dag_run = run_dag_test(kueue_gang(f"real_topology_one_rack_{mode['reservation']}", 4, **arguments))
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    racks = racks_bound(cluster, seen["v1/pods"].versions, summary["gang"])
    assert len(racks) == 4 and set(racks.values()) == {"rack-y1"}, racks
    assert summary["rank_domains"] == dict.fromkeys(["0", "1", "2", "3"], "rack-y1")


def test_a_gang_no_rack_holds_never_binds_a_member_and_runs_once_loosened_to_a_block(cluster: RealBackend) -> None:
    dag = kueue_gang(
        "real_topology_loosened",
        5,
        retries=1,
        fallbacks=[LoosenTopology(BLOCK)],
        reservation_timeout=timedelta(seconds=45),
    )
    with recording(str(cluster.cluster.kubeconfig_path), "v1/pods") as seen:
        dag_run = run_dag_test(dag)
    assert task_instance(dag_run).state == "success"
    first, second = summary_of(dag_run)["tries"]
    assert (first["step"], first["outcome"]) == ("as configured", "deadline")
    assert racks_bound(cluster, seen["v1/pods"].versions, first["gang"]) == {}
    assert (second["step"], second["outcome"]) == (f"loosen the topology to require {BLOCK}", "all_succeeded")
    placed = racks_bound(cluster, seen["v1/pods"].versions, second["gang"])
    assert len(placed) == 5
    assert len({rack.split("-")[1][0] for rack in placed.values()}) == 1, placed  # one block

"""Topology-aware gangs end to end on gang-sim, through ``dag.test()``, on a cluster the test writes
(``bench.topology_cluster.one_rack_document``, no scenario of the repository): exactly one rack,
``rack-y1``, can hold a gang of 4, so a gang of 4 with ``required_topology`` = rack lands wholly there
in every mode; a gang of 5, which no rack holds, never has a member bound and runs once
``LoosenTopology`` widens it to a block (``kueue``, ``gates`` and ``workload``). The real-tier twin is
``tests/real/test_topology_gangs.py``."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.reservation.fallback import LoosenTopology
from airflow_provider_gang.reservation.topology.labels import HOSTNAME
from bench.topology_cluster import BLOCK, RACK, document, gpu_pool, one_rack_document, write
from tests.e2e.gang_dags import gang_dag, gang_objects, simulated_pod, summary_of, task_instance
from tests.e2e.topology_watch import Bindings

MODES: dict[str, dict[str, Any]] = {
    "kueue": {"reservation": "kueue", "kueue_queue": "tas"},
    "gates": {"reservation": "gates"},
    "workload": {"reservation": "workload"},
    "provisioning_request": {"reservation": "provisioning_request"},
}


@pytest.fixture
def one_rack(tmp_path: Path) -> Path:
    return write(tmp_path / "one-rack.yaml", one_rack_document())


def topology_gang(dag_id: str, size: int, mode: str, **arguments: Any) -> Any:
    options: dict[str, Any] = {
        "gpus": 1,
        "cpu": "1",
        "pod_template": simulated_pod(20),
        "deferrable": True,
        "reservation_timeout": timedelta(seconds=120),
        "startup_timeout": timedelta(seconds=60),
        **MODES[mode],
    }
    return gang_dag(dag_id, size=size, **{**options, **arguments})


@pytest.mark.parametrize("mode", list(MODES))
def test_a_gang_of_4_lands_wholly_in_the_one_rack_that_holds_it(
    mode: str, one_rack: Path, cluster_factory: Any, run_dag: Any, capfd: Any
) -> None:
    cluster = cluster_factory(str(one_rack), time_scale=60)
    bindings = Bindings(cluster)
    dag_run = run_dag(topology_gang(f"topology_one_rack_{mode}", 4, mode, required_topology=RACK))
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    gang = summary["gang"]
    assert len(bindings.of(gang)) == 4
    assert bindings.domains(gang, RACK) == {"rack-y1"}
    assert summary["rank_domains"] == dict.fromkeys(["0", "1", "2", "3"], "rack-y1")
    assert summary["required_topology"] == RACK
    if mode != "workload":  # the provider (gates, provisioning_request) or Kueue placed the ranks
        assert consecutive_ranks_share_hosts(bindings, gang)
    world = bindings.worlds[f"{gang}-world"]
    assert (world["topology"], world["domains"]) == (
        RACK,
        '{"0": "rack-y1", "1": "rack-y1", "2": "rack-y1", "3": "rack-y1"}',
    )
    assert gang_objects(cluster) == {}
    log = capfd.readouterr().out  # the task log: what the room said, where the ranks went and ran
    assert "rack-y1 holds the 4 members (room: rack-y1 4, rack-x1 3, rack-x2 3, rack-y2 2)" in log
    assert f"ranks by {RACK}: rack-y1: ranks 0-3" in log
    assert f"where the ranks ran ({RACK}): rack-y1: ranks 0-3" in log


def consecutive_ranks_share_hosts(bindings: Bindings, gang: str) -> bool:
    """Whether each host's ranks are one run of consecutive numbers (a member pod is ``<gang>-<rank>``
    in the provider's modes; a Kueue Job's pod ``<job>-<completion index>-<suffix>``)."""
    hosts = {}
    for pod, node in bindings.of(gang).items():
        rank = int(pod[len(gang) + 1 :].split("-")[0])
        hosts[rank] = bindings.label_of(node, HOSTNAME)
    order = [hosts[rank] for rank in sorted(hosts)]
    return all(
        order.index(host) + order.count(host) - 1 == len(order) - 1 - order[::-1].index(host) for host in set(order)
    )


@pytest.mark.parametrize("mode", ["kueue", "gates", "workload"])
def test_a_gang_no_rack_holds_never_binds_a_member_and_runs_once_loosened_to_a_block(
    mode: str, one_rack: Path, cluster_factory: Any, run_dag: Any
) -> None:
    cluster = cluster_factory(str(one_rack), time_scale=60)
    bindings = Bindings(cluster)
    dag = topology_gang(
        f"topology_loosened_{mode}",
        5,
        mode,
        required_topology=RACK,
        retries=1,
        fallbacks=[LoosenTopology(BLOCK)],
        reservation_timeout=timedelta(seconds=60),
    )
    dag_run = run_dag(dag)
    assert task_instance(dag_run).state == "success"
    first, second = summary_of(dag_run)["tries"]
    # Kueue and the Workload API keep the gang pending; the rack asked for (gates) is of fixed size, so
    # its ProvisioningRequest waits for capacity the autoscaler cannot find: each until the deadline.
    assert (first["step"], first["outcome"]) == ("as configured", "deadline")
    assert bindings.of(first["gang"]) == {}
    assert (second["step"], second["outcome"]) == (f"loosen the topology to require {BLOCK}", "all_succeeded")
    assert len(bindings.of(second["gang"])) == 5 and len(bindings.domains(second["gang"], BLOCK)) == 1
    assert gang_objects(cluster) == {}


def test_a_preferred_topology_spreads_over_the_fewest_racks(one_rack: Path, cluster_factory: Any, run_dag: Any) -> None:
    cluster = cluster_factory(str(one_rack), time_scale=60)
    bindings = Bindings(cluster)
    dag_run = run_dag(topology_gang("topology_preferred", 7, "gates", preferred_topology=RACK))
    assert task_instance(dag_run).state == "success"
    gang = summary_of(dag_run)["gang"]
    assert bindings.domains(gang, RACK) == {"rack-y1", "rack-x1"}  # 4 + 3: the roomiest first, by name
    assert consecutive_ranks_share_hosts(bindings, gang)


GROWN_RACK = {"rack-a1": (3,), "rack-z1": (2,)}
"""rack-a1: one fixed host, 1 GPU free; rack-z1: one host of up to three, 2 GPUs free."""


@pytest.mark.parametrize("mode", ["gates", "provisioning_request"])
def test_when_no_rack_holds_the_gang_the_autoscaler_grows_the_one_asked(
    mode: str, tmp_path: Path, cluster_factory: Any, run_dag: Any
) -> None:
    pools = [gpu_pool("rack-a1", 1), gpu_pool("rack-z1", 1, max_hosts=3)]
    scenario = write(tmp_path / "grow.yaml", document("grow", pools, GROWN_RACK))
    cluster = cluster_factory(str(scenario), time_scale=60)
    bindings = Bindings(cluster)
    dag_run = run_dag(topology_gang(f"topology_grown_{mode}", 6, mode, required_topology=RACK))
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert bindings.domains(summary["gang"], RACK) == {"rack-z1"}
    assert len({node for node in bindings.of(summary["gang"]).values()}) == 2  # the old host and a new one
    assert "no rack has room for 6 members" in summary["tries"][0]["topology_note"]


def test_a_queue_whose_flavor_has_no_topology_is_refused_naming_it(
    one_rack: Path, cluster_factory: Any, run_dag: Any, capfd: Any
) -> None:
    cluster = cluster_factory(str(one_rack), time_scale=60)
    dag_run = run_dag(topology_gang("topology_plain_queue", 4, "kueue", kueue_queue="plain", required_topology=RACK))
    assert task_instance(dag_run).state == "failed"
    out = capfd.readouterr().out
    assert "LocalQueue default/plain (ClusterQueue 'plain') cannot place a gang by topology" in out
    assert "ResourceFlavor 'gpu' has no topology (spec.topologyName)" in out
    assert gang_objects(cluster) == {} and cluster.objects("batch/v1/jobs") == []


def test_the_workload_api_without_its_topology_gate_is_refused_naming_the_gate(
    tmp_path: Path, cluster_factory: Any, run_dag: Any, capfd: Any
) -> None:
    scenario = write(tmp_path / "no-gate.yaml", one_rack_document(gate=False))
    cluster = cluster_factory(str(scenario), time_scale=60)
    dag_run = run_dag(topology_gang("topology_no_gate", 4, "workload", required_topology=RACK))
    assert task_instance(dag_run).state == "failed"
    out = capfd.readouterr().out
    assert "the feature gate TopologyAwareWorkloadScheduling is off" in out
    assert gang_objects(cluster) == {} and cluster.objects("scheduling.k8s.io/v1beta1/podgroups") == []


def test_auto_without_the_gate_chooses_gates_and_pins_the_rack(
    tmp_path: Path, cluster_factory: Any, run_dag: Any
) -> None:
    scenario = write(tmp_path / "no-gate.yaml", one_rack_document(gate=False))
    cluster = cluster_factory(str(scenario), time_scale=60)
    bindings = Bindings(cluster)
    dag_run = run_dag(
        gang_dag(
            "topology_auto",
            size=4,
            gpus=1,
            cpu="1",
            pod_template=simulated_pod(20),
            reservation="auto",
            required_topology=RACK,
            deferrable=True,
        )
    )
    assert task_instance(dag_run).state == "success"
    summary = summary_of(dag_run)
    assert summary["reservation_mode"] == "gates"
    assert bindings.domains(summary["gang"], RACK) == {"rack-y1"}

"""Scenario loading: named scenarios parse; bad files are rejected with the offending field named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gang_sim.world.cloud import NodeRecord, node_manifest
from gang_sim.world.node_topology import BLOCK_LABEL, HOST_LABEL, SUBBLOCK_LABEL
from gang_sim.world.scenario import ScenarioError, load_scenario, named_scenarios, parse_scenario


def _pool(**overrides: Any) -> dict[str, Any]:
    return {"name": "gpu", "zone": "us-central1-a", "gpuType": "nvidia-l4", "gpusPerNode": 1, **overrides}


def test_named_scenarios_include_demo_and_seed_cost() -> None:
    assert {"demo", "seed-cost"} <= set(named_scenarios())
    for name in named_scenarios():
        assert load_scenario(name).name == name


def test_demo_has_two_zones_and_scarce_gpus() -> None:
    demo = load_scenario("demo")
    assert {pool.zone for pool in demo.node_pools} == {"us-central1-a", "us-central1-b"}
    assert demo.zone_gpu_quota["us-central1-b"] == 8
    assert [event.type for event in demo.events] == ["zoneSaturated", "quotaChange"]


def test_seed_cost_is_32_gpus_scaling_4_per_minute() -> None:
    seed = load_scenario("seed-cost")
    (pool,) = seed.node_pools
    assert pool.gpus_per_node * pool.max_nodes == 32
    assert pool.gpus_per_node * seed.autoscaler.incremental_nodes_per_minute == 4


def test_defaults_follow_upstream_flags() -> None:
    scenario = parse_scenario({"nodePools": [_pool()]})
    assert scenario.autoscaler.scan_interval_seconds == 10
    assert scenario.autoscaler.booking_seconds == 600
    assert (scenario.autoscaler.initial_backoff_seconds, scenario.autoscaler.max_backoff_seconds) == (60, 600)
    assert scenario.kueue.wait_for_pods_ready_timeout_seconds == 1800


def test_a_pool_topology_labels_every_node_with_its_block_subblock_and_own_host() -> None:
    scenario = parse_scenario({"nodePools": [_pool(topology={"block": "b1", "subblock": "b1-r2"})]})
    (pool,) = scenario.node_pools
    labels = [
        node_manifest(pool, NodeRecord(name=name, pool=pool.name, gpus=1, created_at=0, ready_at=0))["metadata"][
            "labels"
        ]
        for name in ("node-a", "node-b")
    ]
    assert [(item[BLOCK_LABEL], item[SUBBLOCK_LABEL], item[HOST_LABEL]) for item in labels] == [
        ("b1", "b1-r2", "node-a"),
        ("b1", "b1-r2", "node-b"),
    ]
    assert [item["kubernetes.io/hostname"] for item in labels] == ["node-a", "node-b"]


def test_a_pool_without_topology_has_no_topology_labels() -> None:
    (pool,) = parse_scenario({"nodePools": [_pool()]}).node_pools
    labels = node_manifest(pool, NodeRecord(name="n", pool=pool.name, gpus=1, created_at=0, ready_at=0))["metadata"][
        "labels"
    ]
    assert not {BLOCK_LABEL, SUBBLOCK_LABEL, HOST_LABEL} & set(labels)


def test_feature_gates_default_off_and_turn_on_by_name() -> None:
    assert parse_scenario({"nodePools": [_pool()]}).feature_gates == frozenset()
    document = {"nodePools": [_pool()], "featureGates": {"TopologyAwareWorkloadScheduling": True}}
    assert parse_scenario(document).feature_gates == {"TopologyAwareWorkloadScheduling"}
    document["featureGates"] = {"TopologyAwareWorkloadScheduling": False}
    assert parse_scenario(document).feature_gates == frozenset()


def test_load_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"nodePools": [_pool(cpu="500m", memory="1Gi")]}))
    scenario = load_scenario(str(path))
    assert scenario.name == "mine"
    assert scenario.node_pools[0].cpu == "500m"


@pytest.mark.parametrize(
    ("document", "field"),
    [
        pytest.param({}, "nodePools", id="no-pools"),
        pytest.param({"nodePools": []}, "nodePools", id="empty-pools"),
        pytest.param({"nodePools": [_pool(gpusPerNode="four")]}, "nodePools[0].gpusPerNode", id="gpus-not-int"),
        pytest.param({"nodePools": [_pool(gpuType=None)]}, "nodePools[0].gpuType", id="gpus-without-type"),
        pytest.param({"nodePools": [_pool(name="GPU_pool")]}, "nodePools[0].name", id="bad-name"),
        pytest.param({"nodePools": [_pool(), _pool()]}, "nodePools[1].name", id="duplicate-pool"),
        pytest.param({"nodePools": [_pool(zone=None)]}, "nodePools[0].zone", id="missing-zone"),
        pytest.param({"nodePools": [_pool(memory="lots")]}, "nodePools[0].memory", id="bad-quantity"),
        pytest.param({"nodePools": [_pool(minNodes=3, maxNodes=2)]}, "nodePools[0].maxNodes", id="max-below-min"),
        pytest.param({"nodePools": [_pool(initialNodes=11)]}, "nodePools[0].initialNodes", id="initial-above-max"),
        pytest.param({"nodePools": [_pool(spot="yes")]}, "nodePools[0].spot", id="spot-not-bool"),
        pytest.param(
            {"nodePools": [_pool(taints=[{"key": "k", "effect": "Sometimes"}])]},
            "nodePools[0].taints[0].effect",
            id="bad-taint-effect",
        ),
        pytest.param({"nodePools": [_pool(gpusPerNod=2)]}, "nodePools[0].gpusPerNod", id="unknown-field-typo"),
        pytest.param({"nodePools": [_pool()], "zones": {"a": {}}}, "zones.a.gpuQuota", id="quota-missing"),
        pytest.param(
            {"nodePools": [_pool()], "autoscaler": {"scanIntervalSeconds": 0}},
            "autoscaler.scanIntervalSeconds",
            id="zero-scan-interval",
        ),
        pytest.param(
            {"nodePools": [_pool()], "events": [{"at": 5, "type": "meteor"}]}, "events[0].type", id="unknown-event"
        ),
        pytest.param(
            {"nodePools": [_pool()], "events": [{"at": 5, "type": "nodePoolDeleted", "pool": "nope"}]},
            "events[0].pool",
            id="event-unknown-pool",
        ),
        pytest.param(
            {"nodePools": [_pool()], "events": [{"at": 5, "until": 5, "type": "zoneSaturated", "zone": "z"}]},
            "events[0].until",
            id="saturation-ends-before-start",
        ),
        pytest.param({"nodePools": [_pool()], "kueue": {"requeueLimit": 1.5}}, "kueue.requeueLimit", id="limit-float"),
        pytest.param(["not", "a", "mapping"], "<root>", id="root-not-mapping"),
        pytest.param(
            {"nodePools": [_pool(topology={"subblock": "r1"})]}, "nodePools[0].topology.block", id="topology-no-block"
        ),
        pytest.param(
            {"nodePools": [_pool(topology={"block": "b/1"})]},
            "nodePools[0].topology.block",
            id="topology-block-not-a-label-value",
        ),
        pytest.param(
            {"nodePools": [_pool(topology={"block": "b1", "subblock": "-r1"})]},
            "nodePools[0].topology.subblock",
            id="topology-subblock-not-a-label-value",
        ),
        pytest.param(
            {"nodePools": [_pool(topology={"block": "b1", "rack": "r1"})]},
            "nodePools[0].topology.rack",
            id="topology-unknown-field",
        ),
        pytest.param(
            {"nodePools": [_pool()], "featureGates": {"GangScheduling": True}},
            "featureGates.GangScheduling",
            id="feature-gate-not-modelled",
        ),
        pytest.param(
            {"nodePools": [_pool()], "featureGates": {"TopologyAwareWorkloadScheduling": "on"}},
            "featureGates.TopologyAwareWorkloadScheduling",
            id="feature-gate-not-bool",
        ),
    ],
)
def test_bad_scenario_names_the_field(document: object, field: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(document)
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")


def test_unknown_scenario_name_lists_known_ones() -> None:
    with pytest.raises(ScenarioError, match="demo"):
        load_scenario("no-such-scenario")


def test_invalid_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("nodePools: [\n")
    with pytest.raises(ScenarioError) as raised:
        load_scenario(str(path))
    assert raised.value.field == "file"


def test_a_shipped_scenario_name_loads_beside_a_folder_of_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "demo").mkdir()  # e.g. the repository's demo/ package, in the working directory
    monkeypatch.chdir(tmp_path)
    assert load_scenario("demo").name == "demo"

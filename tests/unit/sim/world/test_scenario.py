"""Scenario loading: named scenarios parse; bad files are rejected with the offending field named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

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

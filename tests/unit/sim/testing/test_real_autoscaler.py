"""The real cluster-autoscaler's configuration (``gang_sim.testing.real.autoscaler``): where several
pools could grow, it takes the fewest nodes, then the pool first by name - as ``gang-sim``'s
autoscaler chooses (``scaleup.plan_atomic``) - through the least-nodes and priority expanders."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from gang_sim.controllers.autoscaler.scaleup import GroupOption, plan_atomic
from gang_sim.testing.real import autoscaler
from gang_sim.world.scenario import parse_scenario


def _pool(name: str) -> dict[str, object]:
    return {"name": name, "zone": "us-central1-a", "gpuType": "nvidia-l4", "gpusPerNode": 1, "maxNodes": 2}


SCENARIO = parse_scenario(
    {"name": "pools", "nodePools": [_pool(name) for name in ("gpu-spot", "gpu-b", "gpu", "gpu-reserved")]}
)


def chosen_by_priority(priorities: dict[int, list[str]], groups: list[str]) -> str:
    """The group the priority expander picks among ``groups``: the one whose pattern has the highest
    priority (``pkg/expander/priority/priority.go``, ``BestOptions``)."""
    ranked = sorted(priorities.items(), reverse=True)
    return next(group for _, patterns in ranked for group in groups if any(re.match(p, group) for p in patterns))


def test_the_priority_expander_ranks_every_pool_by_name_the_first_highest() -> None:
    scenario = SCENARIO
    (config_map,) = [
        item
        for item in autoscaler.configuration_objects(scenario)
        if item["metadata"]["name"] == "cluster-autoscaler-priority-expander"
    ]
    assert config_map["metadata"]["namespace"] == autoscaler.NAMESPACE
    priorities = yaml.safe_load(config_map["data"]["priorities"])
    assert priorities == autoscaler.pool_priorities(scenario)
    names = [pool.name for pool in scenario.node_pools]
    assert sorted(pattern for patterns in priorities.values() for pattern in patterns) == sorted(
        f"^{re.escape(name)}$" for name in names
    )
    assert chosen_by_priority(priorities, ["gpu-spot", "gpu-b", "gpu", "gpu-reserved"]) == "gpu"
    assert chosen_by_priority(priorities, ["gpu-reserved", "gpu-b"]) == "gpu-b"
    assert chosen_by_priority(priorities, ["gpu-b"]) == "gpu-b"  # anchored: "gpu" does not match "gpu-b"


def test_gang_sim_breaks_the_same_tie_the_same_way() -> None:
    allocatable = {"cpu": "8", "pods": "110", "nvidia.com/gpu": "1"}
    template = {"metadata": {"labels": {}}, "status": {"allocatable": allocatable}}
    pod = {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]}
    groups = [GroupOption(name, template, 2) for name in ("gpu-reserved", "gpu-b", "gpu")]
    assert plan_atomic([pod, pod], groups) == ("gpu", 2)


def test_the_autoscaler_runs_the_two_expanders_in_that_order(tmp_path: Path) -> None:
    from gang_sim.testing.real.binaries import Binaries
    from gang_sim.testing.real.certificates import cluster_authority
    from gang_sim.testing.real.workspace import Workspace

    workspace = Workspace(tmp_path, Binaries(tmp_path), cluster_authority())
    try:
        launch = autoscaler.launch(workspace, tmp_path / "admin.kubeconfig", SCENARIO)
    finally:
        workspace.ports.release()
    assert "--expander=least-nodes,priority" in launch.command

"""The real control plane's nodes and kwok configuration (``gang_sim.testing.real.nodes``, ``.stages``):
the scenario's nodes carry their hostnames, the autoscaler's templates none, and kwok gives a node
without one its own name before it makes the node Ready."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gang_sim.testing.real import nodes, stages
from gang_sim.world.cloud import HOSTNAME_LABEL
from gang_sim.world.node_topology import BLOCK_LABEL, HOST_LABEL
from gang_sim.world.scenario import load_scenario

NOT_READY = {
    "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
    "operator": "NotIn",
    "values": ["True"],
}


def kwok_manifests(folder: Path) -> Path:
    """A manifests folder with kwok's stage files, node-initialize selecting as upstream's does."""
    (folder / "kwok").mkdir(parents=True)
    for name in stages.KWOK_STAGE_FILES:
        stage = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": name.removesuffix(".yaml")},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Node" if name.startswith("node") else "Pod"},
                "selector": {"matchExpressions": [NOT_READY]},
                "next": {"statusTemplate": "phase: Running"},
            },
        }
        (folder / "kwok" / name).write_text(yaml.safe_dump(stage))
    return folder


def rendered(template: str, name: str, labels: dict[str, str]) -> Any:
    """The patch as kwok renders it for a node ``name`` with ``labels``: the Go template's
    ``{{- if index .metadata.labels "<key>" }} ... {{- end }}`` blocks (``{{-`` trims the whitespace
    before it) and ``{{ .metadata.name | Quote }}``, then YAML."""

    def block(match: re.Match[str]) -> str:
        return match.group(2) if match.group(1) in labels else ""

    text = re.sub(
        r'\s*\{\{- if index \.metadata\.labels "([^"]+)" \}\}(.*?)\s*\{\{- end \}\}', block, template, flags=re.S
    )
    return yaml.safe_load(text.replace("{{ .metadata.name | Quote }}", f'"{name}"'))


def test_the_scenario_nodes_have_their_names_as_hostnames_and_the_templates_none() -> None:
    scenario = load_scenario("small")
    initial = nodes.initial_nodes(scenario)
    assert initial and all(node["metadata"]["labels"][HOSTNAME_LABEL] == node["metadata"]["name"] for node in initial)
    templates = nodes.autoscaler_templates(scenario)["items"]
    assert len(templates) == len(scenario.node_pools)
    assert all(HOSTNAME_LABEL not in template["metadata"]["labels"] for template in templates)
    racks = nodes.autoscaler_templates(load_scenario("topology"))["items"]
    assert all(HOST_LABEL not in template["metadata"]["labels"] for template in racks)  # a host is a node's own
    assert {template["metadata"]["labels"].get(BLOCK_LABEL) for template in racks} == {None, "block-a", "block-b"}


def test_kwok_labels_a_node_without_a_hostname_with_its_name_before_it_makes_it_ready(tmp_path: Path) -> None:
    target = stages.write_configuration(kwok_manifests(tmp_path / "manifests"), tmp_path / "kwok.yaml")
    by_name = {stage["metadata"]["name"]: stage for stage in yaml.safe_load_all(target.read_text())}
    hostname = by_name["node-hostname"]["spec"]
    assert hostname["resourceRef"] == {"apiGroup": "v1", "kind": "Node"}
    label = f'.metadata.labels["{HOSTNAME_LABEL}"]'
    assert hostname["selector"]["matchExpressions"] == [{"key": label, "operator": "DoesNotExist"}]
    (patch,) = hostname["next"]["patches"]
    assert patch["root"] == "metadata"
    assert rendered(patch["template"], "gpu-x7k2p", {}) == {"labels": {HOSTNAME_LABEL: "gpu-x7k2p"}}
    assert rendered(patch["template"], "rack-b2-x7k2p", {BLOCK_LABEL: "block-b"}) == {
        "labels": {HOSTNAME_LABEL: "rack-b2-x7k2p", HOST_LABEL: "rack-b2-x7k2p"}
    }
    initialize = by_name["node-initialize"]["spec"]["selector"]["matchExpressions"]
    assert initialize == [NOT_READY, {"key": label, "operator": "Exists"}]
    others = [stage for name, stage in by_name.items() if name not in ("node-initialize", "node-hostname")]
    assert all(stage["spec"]["selector"]["matchExpressions"][-1]["key"] != label for stage in others)
    assert {"gang-member-start", "gang-member-exit"} <= set(by_name)

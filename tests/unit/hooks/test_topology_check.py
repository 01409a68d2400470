"""Whether Kueue can place a gang by topology through its queue (``hooks.topology_check.kueue_refusal``,
pure): some flavor covering the members' resources must name a Topology with the gang's level; and
whether a dry-run answer kept the Workload API's constraint."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.hooks import topology_check

RACK = "cloud.google.com/gce-topology-subblock"
TOPOLOGY = {"metadata": {"name": "racks"}, "spec": {"levels": [{"nodeLabel": "b"}, {"nodeLabel": RACK}]}}


def queue(*flavors: str, covered: tuple[str, ...] = ("cpu", "nvidia.com/gpu")) -> dict[str, Any]:
    group = {"coveredResources": list(covered), "flavors": [{"name": name} for name in flavors]}
    return {"metadata": {"name": "cq"}, "spec": {"resourceGroups": [group]}}


def flavor(topology: str | None) -> dict[str, Any]:
    return {"spec": {"topologyName": topology} if topology else {}}


CASES = [
    ("tas-flavor", queue("tas"), {"tas": flavor("racks")}, {"racks": TOPOLOGY}, None),
    ("one-of-two", queue("plain", "tas"), {"plain": flavor(None), "tas": flavor("racks")}, {"racks": TOPOLOGY}, None),
    ("no-topology", queue("plain"), {"plain": flavor(None)}, {}, "ResourceFlavor 'plain' has no topology"),
    ("flavor-missing", queue("gone"), {"gone": None}, {}, "ResourceFlavor 'gone' does not exist"),
    (
        "topology-missing",
        queue("tas"),
        {"tas": flavor("racks")},
        {"racks": None},
        "names Topology 'racks', which does not exist",
    ),
    (
        "no-such-level",
        queue("tas"),
        {"tas": flavor("racks")},
        {"racks": {"spec": {"levels": [{"nodeLabel": "b"}]}}},
        f"Topology 'racks' of ResourceFlavor 'tas' has no level {RACK} (levels: b)",
    ),
    ("group-covers-nothing-requested", queue("plain", covered=("memory",)), {}, {}, None),
]


@pytest.mark.parametrize(
    ("cluster_queue", "flavors", "topologies", "said"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_queue_without_a_flavor_that_places_by_the_label_is_refused_naming_each(
    cluster_queue: dict[str, Any], flavors: dict[str, Any], topologies: dict[str, Any], said: str | None
) -> None:
    refusal = topology_check.kueue_refusal(
        "default/team", cluster_queue, flavors, topologies, label=RACK, requested=["cpu", "nvidia.com/gpu"]
    )
    if said is None:
        assert refusal is None
    else:
        assert refusal is not None and said in refusal
        assert refusal.startswith(f"LocalQueue default/team (ClusterQueue 'cq') cannot place a gang by topology {RACK}")


def test_a_dry_run_answer_without_the_constraint_names_the_gate() -> None:
    kept = {"spec": {"schedulingConstraints": {"topology": [{"key": RACK}]}}}
    assert topology_check.workload_refusal_of(kept, RACK) is None
    refusal = topology_check.workload_refusal_of({"spec": {"schedulingPolicy": {}}}, RACK)
    assert refusal is not None and "feature gate TopologyAwareWorkloadScheduling is off" in refusal

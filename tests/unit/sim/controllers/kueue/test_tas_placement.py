"""Kueue's Topology Aware Scheduling placement (``gang_sim.controllers.kueue.tas_placement``), table-driven.

The cluster: two blocks of racks of hosts, one GPU per pod, so a host's free GPUs are the pods it can
take::

    b1 ─ b1-r1 ─ b1-r1-h1 (4)  b1-r1-h2 (4)                  rack 8
       └ b1-r2 ─ b1-r2-h1 (2)  b1-r2-h2 (1)  b1-r2-h3 (0)    rack 3    block 11
    b2 ─ b2-r1 ─ b2-r1-h1 (4)  b2-r1-h2 (2)                  rack 6    block 6

Expected placements follow kubernetes-sigs/kueue v0.17.0 ``tas_flavor_snapshot.go``: BestFit for
required and preferred PodSets (the domain with the least room that still holds them), going up a
level for preferred ones, LeastFreeCapacity at the hostname level for unconstrained ones.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gang_sim.controllers.kueue import tas
from gang_sim.controllers.kueue.tas_placement import Placement, PlacementRequest, count_in, place
from gang_sim.world.resources import Resources

BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
FREE_GPUS = {
    "b1-r1-h1": 4,
    "b1-r1-h2": 4,
    "b1-r2-h1": 2,
    "b1-r2-h2": 1,
    "b1-r2-h3": 0,
    "b2-r1-h1": 4,
    "b2-r1-h2": 2,
}
PER_POD: Resources = {"cpu": Fraction(1), "nvidia.com/gpu": Fraction(1), "pods": Fraction(1)}
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def node(
    host: str, *, taints: list[dict[str, str]] | None = None, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    block, rack = host.split("-")[0], "-".join(host.split("-")[:2])
    return {
        "metadata": {"name": host, "labels": {BLOCK: block, RACK: rack, HOST: host, **(extra or {})}},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "allocatable": {"cpu": "48", "memory": "192Gi", "nvidia.com/gpu": "4", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def used_gpus(free: dict[str, int]) -> dict[str, Resources]:
    """The non-TAS pods' usage that leaves each host ``free`` GPUs."""
    return {
        host: {"nvidia.com/gpu": Fraction(4 - gpus), "pods": Fraction(1)} for host, gpus in free.items() if gpus < 4
    }


def snapshot(
    levels: tuple[str, ...] = (BLOCK, RACK, HOST),
    nodes: list[dict[str, Any]] | None = None,
    usage: dict[str, Resources] | None = None,
) -> Any:
    topology = {"metadata": {"name": "default"}, "spec": {"levels": [{"nodeLabel": level} for level in levels]}}
    flavor = {"metadata": {"name": "tas"}, "spec": {"topologyName": "default", "tolerations": []}}
    nodes = nodes if nodes is not None else [node(host) for host in FREE_GPUS]
    return tas.snapshot(flavor, topology, nodes, used_gpus(FREE_GPUS), usage or {})


def request(count: int, kind: str, level: str | None = None, **options: Any) -> PlacementRequest:
    return PlacementRequest(count=count, per_pod=PER_POD, kind=kind, level=level, **options)


def hosts(*pairs: tuple[str, int]) -> Placement:
    return Placement((HOST,), tuple(((host,), count) for host, count in pairs))


PLACEMENTS = [
    pytest.param(request(4, "required", RACK), hosts(("b2-r1-h1", 4)), id="required-rack-4-best-fit-rack-of-6"),
    pytest.param(
        request(7, "required", RACK), hosts(("b1-r1-h1", 4), ("b1-r1-h2", 3)), id="required-rack-7-only-rack-of-8"
    ),
    pytest.param(request(2, "required", RACK), hosts(("b1-r2-h1", 2)), id="required-rack-2-fullest-rack-that-holds"),
    pytest.param(
        request(9, "preferred", RACK),
        hosts(("b1-r1-h1", 4), ("b1-r1-h2", 4), ("b1-r2-h2", 1)),
        id="preferred-rack-9-up-to-block-b1",
    ),
    pytest.param(
        # both blocks; below the top level Kueue fills the chosen domains' children pooled, largest
        # first, whatever share each parent got ("greedily assigning pods to all domains")
        request(14, "preferred", RACK),
        hosts(("b1-r1-h1", 4), ("b1-r1-h2", 4), ("b2-r1-h1", 4), ("b2-r1-h2", 2)),
        id="preferred-rack-14-over-both-blocks",
    ),
    pytest.param(request(6, "required", BLOCK), hosts(("b2-r1-h1", 4), ("b2-r1-h2", 2)), id="required-block-6-b2"),
    pytest.param(request(3, "unconstrained"), hosts(("b1-r1-h1", 3)), id="unconstrained-3-fullest-host-that-holds"),
    pytest.param(
        request(12, "unconstrained"),
        hosts(("b1-r1-h1", 4), ("b1-r1-h2", 3), ("b1-r2-h1", 2), ("b1-r2-h2", 1), ("b2-r1-h2", 2)),
        id="unconstrained-12-fullest-hosts-first",
    ),
]


@pytest.mark.parametrize(("wanted", "expected"), PLACEMENTS)
def test_placement_follows_kueue(wanted: PlacementRequest, expected: Placement) -> None:
    assert place(snapshot(), wanted) == expected


NOT_FIT = (
    'topology "default" allows to fit only {} out of {} pod(s). Total nodes: 7; excluded: resource "nvidia.com/gpu": 1'
)
FAILURES = [
    pytest.param(request(9, "required", RACK), NOT_FIT.format(8, 9), id="required-rack-9-no-rack-holds"),
    pytest.param(request(12, "required", BLOCK), NOT_FIT.format(11, 12), id="required-block-12-no-block-holds"),
    pytest.param(request(20, "preferred", RACK), NOT_FIT.format(17, 20), id="preferred-20-more-than-the-cluster"),
    pytest.param(
        request(2, "required", "example.com/row"), "no requested topology level: example.com/row", id="no-level"
    ),
]


@pytest.mark.parametrize(("wanted", "message"), FAILURES)
def test_what_does_not_fit_says_why_in_kueues_words(wanted: PlacementRequest, message: str) -> None:
    assert place(snapshot(), wanted) == message


def test_nothing_fits_and_the_excluded_nodes_are_counted_by_reason() -> None:
    nodes = [node(host, taints=[TAINT]) for host in FREE_GPUS if host.startswith("b1")]
    nodes += [node(host, extra={"pool": "other"}) for host in FREE_GPUS if host.startswith("b2")]
    wanted = request(1, "required", RACK, node_selector={"pool": "gpu"})
    assert place(snapshot(nodes=nodes), wanted) == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 7; excluded: nodeSelector: 2, '
        'taint "nvidia.com/gpu=present:NoSchedule": 5'
    )
    tolerated = request(1, "required", RACK, tolerations=({"key": "nvidia.com/gpu", "operator": "Exists"},))
    assert place(snapshot(nodes=nodes), tolerated) == hosts(("b1-r2-h2", 1))


def test_tas_usage_and_what_the_pass_assumed_take_capacity() -> None:
    taken = {"b2-r1-h1": {"nvidia.com/gpu": Fraction(4), "pods": Fraction(4)}}
    assert place(snapshot(usage=taken), request(4, "required", RACK)) == hosts(("b1-r1-h1", 4))
    assumed = {"b1-r1-h1": {"nvidia.com/gpu": Fraction(1), "pods": Fraction(1)}}  # now h2 has more room
    assert place(snapshot(usage=taken), request(4, "required", RACK), assumed) == hosts(("b1-r1-h2", 4))


def test_without_hostname_level_a_leaf_is_the_sum_of_its_nodes_and_values_are_full_paths() -> None:
    placement = place(snapshot(levels=(BLOCK, RACK)), request(5, "required", RACK))
    assert placement == Placement((BLOCK, RACK), ((("b2", "b2-r1"), 5),))


def test_a_node_outside_the_flavor_or_not_ready_is_not_in_the_snapshot() -> None:
    flavor = {"spec": {"topologyName": "default", "nodeLabels": {"pool": "gpu"}}}
    topology = {"metadata": {"name": "default"}, "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": HOST}]}}
    ready = node("b1-r1-h1", extra={"pool": "gpu"})
    not_ready = node("b1-r1-h2", extra={"pool": "gpu"})
    not_ready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    cordoned = node("b1-r2-h1", extra={"pool": "gpu"})
    cordoned["spec"]["unschedulable"] = True
    other_pool = node("b2-r1-h1")
    no_level = node("b2-r1-h2", extra={"pool": "gpu"})
    del no_level["metadata"]["labels"][BLOCK]
    found = tas.snapshot(flavor, topology, [ready, not_ready, cordoned, other_pool, no_level], {}, {})
    assert [leaf.id for leaf in found.leaves] == ["b1-r1-h1"]


@pytest.mark.parametrize(
    ("free", "expected"),
    [
        pytest.param(
            {"cpu": Fraction(10), "nvidia.com/gpu": Fraction(3), "pods": Fraction(5)},
            (3, "nvidia.com/gpu"),
            id="gpu-limits",
        ),
        pytest.param(
            {"cpu": Fraction(2), "nvidia.com/gpu": Fraction(2), "pods": Fraction(5)}, (2, "cpu"), id="tie-to-first-name"
        ),
        pytest.param({"cpu": Fraction(10), "pods": Fraction(5)}, (0, "nvidia.com/gpu"), id="resource-missing"),
    ],
)
def test_count_in_is_kueues_count_with_its_limiting_resource(free: Resources, expected: tuple[int, str]) -> None:
    assert count_in(PER_POD, free) == expected


ENCODINGS = [
    pytest.param(
        hosts(("gke-rack-a-x1", 4), ("gke-rack-a-x2", 3)),
        {
            "levels": [HOST],
            "slices": [
                {
                    "domainCount": 2,
                    "valuesPerLevel": [{"individual": {"prefix": "gke-rack-a-x", "roots": ["1", "2"]}}],
                    "podCounts": {"individual": [4, 3]},
                }
            ],
        },
        id="common-prefix-individual-counts",
    ),
    pytest.param(
        hosts(("node-a", 2)),
        {
            "levels": [HOST],
            "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "node-a"}], "podCounts": {"universal": 2}}],
        },
        id="one-domain-universal",
    ),
    pytest.param(
        Placement((BLOCK, RACK), ((("b1", "ababa"), 1), (("b1", "aba"), 1))),
        {
            "levels": [BLOCK, RACK],
            "slices": [
                {
                    "domainCount": 2,
                    "valuesPerLevel": [{"universal": "b1"}, {"individual": {"suffix": "aba", "roots": ["ab", ""]}}],
                    "podCounts": {"universal": 1},
                }
            ],
        },
        id="prefix-and-suffix-never-overlap",
    ),
    pytest.param(Placement((HOST,), ()), {"levels": [HOST], "slices": []}, id="empty"),
]


@pytest.mark.parametrize(("placement", "api"), ENCODINGS)
def test_topology_assignment_in_v1beta2_compact_form_and_back(placement: Placement, api: dict[str, Any]) -> None:
    assert tas.to_api(placement) == api
    assert tuple(tas.domains_of(api)) == placement.domains

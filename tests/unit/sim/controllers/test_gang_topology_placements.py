"""The pure parts of topology-constrained gang scheduling (``gang_sim.controllers.gang_scheduling``):
the placements ``TopologyPlacementGenerator`` makes, and ``GangScheduling.PlacementFeasible``'s message
where a placement's pod loop stops (k8s.io/kubernetes v1.37.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gang_sim.controllers.gang_scheduling import min_count_failure, placements

RACK = "example.com/rack"


def node(name: str, rack: str | None) -> dict[str, Any]:
    labels = {} if rack is None else {RACK: rack}
    return {"metadata": {"name": name, "labels": labels}}


NODES = [node("a1", "rack-a"), node("b1", "rack-b"), node("a2", "rack-a"), node("x", None)]


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        pytest.param([], ([("rack-a", ["a1", "a2"]), ("rack-b", ["b1"])], None), id="one-per-value-in-name-order"),
        pytest.param(["a2"], ([("rack-a", ["a1", "a2"])], None), id="bound-pods-keep-the-group-in-their-domain"),
        pytest.param(["a1", "b1"], ([], "more than 1 domain found for pod group: rack-a, rack-b"), id="bound-in-two"),
        pytest.param(["x"], ([], "no topology domain found for pod"), id="bound-on-a-node-without-the-label"),
        pytest.param(["gone"], ([], "getting node for pod: nodeinfo not found for node name 'gone'"), id="node-gone"),
    ],
)
def test_placements(bound: list[str], expected: tuple[list[tuple[str, list[str]]], str | None]) -> None:
    found, error = placements(RACK, NODES, bound)
    assert ([(domain, [item["metadata"]["name"] for item in nodes]) for domain, nodes in found], error) == expected


@dataclass(frozen=True)
class Tried:
    node: str | None
    reason: str = ""


@pytest.mark.parametrize(
    ("tried", "bound", "min_count", "message"),
    [
        pytest.param(
            [Tried("n")] * 2 + [Tried(None)] * 5,
            0,
            7,
            "minCount (7) cannot be satisfied: 2 scheduled, 4 remaining",
            id="two-fit",
        ),
        pytest.param(
            [Tried("n")] * 3 + [Tried(None)] * 4,
            0,
            7,
            "minCount (7) cannot be satisfied: 3 scheduled, 3 remaining",
            id="three-fit",
        ),
        pytest.param(
            [Tried(None)] * 2, 0, 3, "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining", id="too-few-pods"
        ),
        pytest.param(
            [Tried(None), Tried("n")],
            1,
            3,
            "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining",
            id="bound-count",
        ),
        pytest.param(
            [Tried(None, "SchedulingGated"), Tried("n"), Tried(None)],
            0,
            3,
            "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
            id="gated-pods-are-not-queued",
        ),
    ],
)
def test_where_a_placements_pod_loop_stops(tried: list[Tried], bound: int, min_count: int, message: str) -> None:
    assert min_count_failure(tried, bound, min_count) == message

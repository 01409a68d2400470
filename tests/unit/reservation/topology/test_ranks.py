"""Ranks in topology order (``reservation.topology.ranks``): consecutive ranks on one host, then one
domain; a domain that filled since it was chosen ends the try; where each rank ran; Kueue's
assignment read as its TopologyUngater reads it (``reservation.topology.kueue_assignment``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from airflow_provider_gang.reservation.errors import PlacementRefused
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.topology import kueue_assignment, ranks, room
from airflow_provider_gang.reservation.topology.labels import BLOCK, HOSTNAME, SUBBLOCK
from airflow_provider_gang.reservation.topology.pins import Placement
from tests.unit.reservation.topology.cluster import MEMBER, filler, racks

NEEDS = room.member_requests(MEMBER)

# (id, free GPUs per rack and host, placement domains, size) -> host of each rank
CASES = [
    ("roomiest-host-first", {"rack-b1": (2, 4)}, ("rack-b1",), 4, ["rack-b1-h1"] * 4),
    ("then-the-next", {"rack-b1": (2, 4)}, ("rack-b1",), 6, ["rack-b1-h1"] * 4 + ["rack-b1-h0"] * 2),
    ("equal-rooms-by-name", {"rack-b1": (2, 2)}, ("rack-b1",), 3, ["rack-b1-h0", "rack-b1-h0", "rack-b1-h1"]),
    (
        "domains-in-the-placements-order",
        {"rack-a2": (0, 3), "rack-b1": (2, 4)},
        ("rack-b1", "rack-a2"),
        8,
        ["rack-b1-h1"] * 4 + ["rack-b1-h0"] * 2 + ["rack-a2-h1"] * 2,
    ),
]


@pytest.mark.parametrize(
    ("free", "domains", "size", "hosts"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_consecutive_ranks_share_a_host_then_a_domain(
    free: Mapping[str, tuple[int, ...]], domains: tuple[str, ...], size: int, hosts: list[str]
) -> None:
    nodes, pods = racks(free)
    placed = ranks.place_ranks(room.rooms(nodes, pods, MEMBER), Placement(SUBBLOCK, domains), size=size, member=NEEDS)
    assert [place.host for place in placed] == hosts
    assert [place.rank for place in placed] == list(range(size))
    assert {place.domain for place in placed} == set(domains)


def test_a_domain_filled_since_the_choice_ends_the_try_naming_what_is_left() -> None:
    nodes, pods = racks({"rack-b1": (2, 4)})
    pods.append(filler("late", "rack-b1-h1", 3))
    with pytest.raises(PlacementRefused) as refused:
        ranks.place_ranks(room.rooms(nodes, pods, MEMBER), Placement(SUBBLOCK, ("rack-b1",)), size=4, member=NEEDS)
    assert refused.value.reason is Reason.TOPOLOGY_DOMAIN_FULL
    assert refused.value.message.startswith("rack rack-b1 now has room for 3 of the 4 members")


def test_a_node_without_a_hostname_label_pins_the_domain_only() -> None:
    nodes, pods = racks({"rack-b1": (4,)})
    del nodes[0]["metadata"]["labels"][HOSTNAME]
    placed = ranks.place_ranks(room.rooms(nodes, pods, MEMBER), Placement(SUBBLOCK, ("rack-b1",)), size=2, member=NEEDS)
    assert [(place.node, place.host) for place in placed] == [("rack-b1-h0", None)] * 2


def test_where_each_rank_ran() -> None:
    nodes, _ = racks({"rack-a1": (4,), "rack-b1": (4,)})
    members = [(0, "rack-b1-h0"), (1, "rack-a1-h0"), (2, None), (3, "gone")]
    assert ranks.rank_domains(members, nodes, SUBBLOCK) == {0: "rack-b1", 1: "rack-a1"}
    assert ranks.rank_domains(members, nodes, BLOCK) == {0: "block-b", 1: "block-a"}


def admitted(assignment: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": {"admission": {"podSetAssignments": [{"name": "main", "count": 4, "topologyAssignment": assignment}]}}
    }


LEVELS = [BLOCK, SUBBLOCK, HOSTNAME]


def test_kueue_assignment_ranks_fill_its_domains_in_order() -> None:
    assignment = {
        "levels": LEVELS,
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universal": "block-b"},
                    {"universal": "rack-b1"},
                    {"individual": {"prefix": "rack-b1-h", "roots": ["1", "0"]}},
                ],
                "podCounts": {"individual": [3, 1]},
            }
        ],
    }
    assert kueue_assignment.rank_domains(admitted(assignment), SUBBLOCK) == dict.fromkeys(range(4), "rack-b1")
    assert kueue_assignment.rank_domains(admitted(assignment), HOSTNAME) == {
        0: "rack-b1-h1",
        1: "rack-b1-h1",
        2: "rack-b1-h1",
        3: "rack-b1-h0",
    }
    assert kueue_assignment.rank_domains(admitted(assignment), "example.com/row") == {}
    assert kueue_assignment.rank_domains({"status": {}}, SUBBLOCK) == {}


def test_an_assignment_of_hosts_only_is_read_through_the_nodes() -> None:
    """Kueue keeps only the hostname level when it is the Topology's lowest."""
    nodes, _ = racks({"rack-a1": (4,), "rack-b1": (4, 4)})
    hosts_only = {
        "levels": [HOSTNAME],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "rack-", "roots": ["b1-h1", "a1-h0"]}}],
                "podCounts": {"universal": 2},
            }
        ],
    }
    assert kueue_assignment.rank_domains(admitted(hosts_only), SUBBLOCK, nodes) == {
        0: "rack-b1",
        1: "rack-b1",
        2: "rack-a1",
        3: "rack-a1",
    }
    unlabelled = [{"metadata": {"name": "cpu-0", "labels": {HOSTNAME: "cpu-0"}}}, {"metadata": {"name": "bare"}}]
    assert kueue_assignment.rank_domains(admitted(hosts_only), SUBBLOCK, [*unlabelled, *nodes]) == {
        0: "rack-b1",
        1: "rack-b1",
        2: "rack-a1",
        3: "rack-a1",
    }


def test_the_first_pod_set_with_an_assignment_is_read() -> None:
    """A Workload's PodSets without a topology assignment (a launcher's, say) come before the workers'."""
    one_rack = {
        "levels": LEVELS,
        "slices": [
            {
                "domainCount": 1,
                "valuesPerLevel": [{"universal": "block-b"}, {"universal": "rack-b1"}, {"universal": "rack-b1-h0"}],
                "podCounts": {"universal": 4},
            }
        ],
    }
    workload = admitted(one_rack)
    workload["status"]["admission"]["podSetAssignments"].insert(0, {"name": "launcher", "count": 1})
    assert kueue_assignment.rank_domains(workload, SUBBLOCK) == dict.fromkeys(range(4), "rack-b1")


def test_a_kueue_assignment_of_an_unknown_shape_raises() -> None:
    broken = {
        "levels": LEVELS,
        "slices": [{"domainCount": 1, "valuesPerLevel": [{"individual": {}}] * 3, "podCounts": {"universal": 1}}],
    }
    with pytest.raises(KeyError):
        kueue_assignment.rank_domains(admitted(broken), SUBBLOCK)

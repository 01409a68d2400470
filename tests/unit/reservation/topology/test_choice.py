"""The domain a gang is pinned to (``reservation.topology.choice``), in its decision order: the tightest
domain that holds the gang, else (preferred) the fewest that do together, else capacity asked in the
roomiest; a required topology on no node is refused, a preferred one left unpinned."""

from __future__ import annotations

import pickle
from collections.abc import Mapping

import pytest

from airflow_provider_gang.reservation.errors import PlacementRefused
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.topology import choice, room
from airflow_provider_gang.reservation.topology.labels import BLOCK, SUBBLOCK
from tests.unit.reservation.topology.cluster import MEMBER, racks

NEEDS = room.member_requests(MEMBER)
# The repository's topology scenario: rack-a1 2 free (1 + 1), rack-a2 3 (0 + 3), rack-b1 6 (2 + 4).
SCENARIO = {"rack-a1": (1, 1), "rack-a2": (0, 3), "rack-b1": (2, 4)}

# (id, free GPUs per rack and host, label, required, size) -> (domains, grows)
CASES = [
    ("one-rack-holds-4", SCENARIO, SUBBLOCK, True, 4, (("rack-b1",), False)),
    ("tightest-of-two-for-3", SCENARIO, SUBBLOCK, True, 3, (("rack-a2",), False)),
    ("tightest-of-three-for-2", SCENARIO, SUBBLOCK, True, 2, (("rack-a1",), False)),
    ("equal-rooms-by-name", {"rack-b1": (2,), "rack-a1": (2,)}, SUBBLOCK, True, 2, (("rack-a1",), False)),
    ("no-rack-holds-7-grow-the-roomiest", SCENARIO, SUBBLOCK, True, 7, (("rack-b1",), True)),
    ("preferred-7-spreads-over-the-fewest", SCENARIO, SUBBLOCK, False, 7, (("rack-b1", "rack-a2"), False)),
    ("preferred-11-over-all-three", SCENARIO, SUBBLOCK, False, 11, (("rack-b1", "rack-a2", "rack-a1"), False)),
    ("preferred-12-more-than-the-cluster-grows", SCENARIO, SUBBLOCK, False, 12, (("rack-b1",), True)),
    ("preferred-that-one-holds-is-one", SCENARIO, SUBBLOCK, False, 5, (("rack-b1",), False)),
    ("block-a-holds-5", SCENARIO, BLOCK, True, 5, (("block-a",), False)),
    ("block-b-tighter-for-6", SCENARIO, BLOCK, True, 6, (("block-b",), False)),
    (
        "full-racks-hold-nothing-grow-by-name",
        {"rack-a1": (0,), "rack-b1": (0,)},
        SUBBLOCK,
        True,
        1,
        (("rack-a1",), True),
    ),
]


@pytest.mark.parametrize(
    ("free", "label", "required", "size", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_the_decision_order(
    free: Mapping[str, tuple[int, ...]], label: str, required: bool, size: int, expected: tuple[tuple[str, ...], bool]
) -> None:
    nodes, pods = racks(free)
    placement = choice.choose(room.rooms(nodes, pods, MEMBER), label=label, required=required, size=size, member=NEEDS)
    assert placement is not None
    assert (placement.label, (placement.domains, placement.grows)) == (label, expected)


def test_the_note_says_why_no_domain_holds_the_gang_and_what_each_holds() -> None:
    nodes, pods = racks(SCENARIO)
    placement = choice.choose(room.rooms(nodes, pods, MEMBER), label=SUBBLOCK, required=True, size=7, member=NEEDS)
    assert placement is not None
    assert placement.note == (
        "no rack has room for 7 members (1 nvidia.com/gpu, 1 cpu each); the best, rack-b1, has room for 6"
        " (room: rack-b1 6, rack-a2 3, rack-a1 2)"
    )


def test_the_note_names_the_domain_that_holds_the_gang() -> None:
    nodes, pods = racks(SCENARIO)
    placement = choice.choose(room.rooms(nodes, pods, MEMBER), label=SUBBLOCK, required=True, size=4, member=NEEDS)
    assert (
        placement is not None
        and placement.note == "rack-b1 holds the 4 members (room: rack-b1 6, rack-a2 3, rack-a1 2)"
    )


def test_a_required_topology_no_node_carries_is_refused_and_a_preferred_one_is_unpinned() -> None:
    nodes, pods = racks(SCENARIO)
    rooms = room.rooms(nodes, pods, MEMBER)
    with pytest.raises(PlacementRefused) as refused:
        choice.choose(rooms, label="example.com/row", required=True, size=2, member=NEEDS)
    assert refused.value.reason is Reason.NO_TOPOLOGY_DOMAIN
    assert "no node a member may run on carries the label example.com/row" in refused.value.message
    assert choice.choose(rooms, label="example.com/row", required=False, size=2, member=NEEDS) is None
    copied = pickle.loads(pickle.dumps(refused.value))  # as it crosses a process or thread pool boundary
    assert (copied.reason, copied.message) == (refused.value.reason, refused.value.message)


def test_nodes_a_member_may_not_run_on_are_in_no_domain() -> None:
    nodes, pods = racks({"rack-a1": (4,), "rack-b1": (2,)})
    nodes[0]["spec"]["unschedulable"] = True
    placement = choice.choose(room.rooms(nodes, pods, MEMBER), label=SUBBLOCK, required=True, size=2, member=NEEDS)
    assert placement is not None and placement.domains == ("rack-b1",)


def test_many_domains_are_listed_up_to_six() -> None:
    nodes, pods = racks({f"rack-{letter}1": (1,) for letter in "abcdefgh"})
    placement = choice.choose(room.rooms(nodes, pods, MEMBER), label=SUBBLOCK, required=True, size=2, member=NEEDS)
    assert placement is not None and placement.note.endswith("rack-f1 1 and 2 more)")

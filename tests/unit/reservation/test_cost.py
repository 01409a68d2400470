"""GPU-second accounting."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import cost
from airflow_provider_gang.reservation.cost import GpuSeconds
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.spec import MemberResources
from tests.builders import gang_spec


def _member(rank, start, end=None):
    return MemberStatus(rank=rank, state=MemberState.SUCCEEDED, started_at=start, finished_at=end)


CASES = [
    ("never-reserved", dict(gpus=8, members_reserved=4, reserved_at=None, released_at=100), GpuSeconds()),
    ("no-gpus", dict(gpus=0, members_reserved=4, reserved_at=0, released_at=100), GpuSeconds()),
    (
        "reserved-never-launched",
        dict(gpus=2, members_reserved=4, reserved_at=0, released_at=100),
        GpuSeconds(800, 0, 800),
    ),
    (
        "all-ran-whole-window",
        dict(
            gpus=1, members_reserved=2, reserved_at=0, released_at=100, members=[_member(0, 0, 100), _member(1, 0, 100)]
        ),
        GpuSeconds(200, 200, 0),
    ),
    (
        "launch-latency-and-straggler",
        dict(
            gpus=1,
            members_reserved=2,
            reserved_at=0,
            released_at=100,
            members=[_member(0, 10, 100), _member(1, 30, 90)],
        ),
        GpuSeconds(200, 150, 50),
    ),
    (
        "still-running-counts-to-release",
        dict(gpus=2, members_reserved=1, reserved_at=0, released_at=60, members=[_member(0, 20)]),
        GpuSeconds(120, 80, 40),
    ),
    (
        "clipped-to-window",
        dict(gpus=1, members_reserved=1, reserved_at=10, released_at=50, members=[_member(0, 0, 70)]),
        GpuSeconds(40, 40, 0),
    ),
    (
        "never-started-member",
        dict(gpus=1, members_reserved=2, reserved_at=0, released_at=10, members=[_member(0, None), _member(1, 0, 10)]),
        GpuSeconds(20, 10, 10),
    ),
    (
        "clock-skew-never-negative",
        dict(gpus=1, members_reserved=1, reserved_at=50, released_at=40, members=[_member(0, 60, 30)]),
        GpuSeconds(0, 0, 0),
    ),
]


@pytest.mark.parametrize(("arguments", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_try_cost(arguments, expected):
    assert cost.try_cost(**arguments) == expected


def test_total_and_hours():
    summed = cost.total([GpuSeconds(3600, 1800, 1800), GpuSeconds(7200, 0, 7200)])
    assert summed == GpuSeconds(10800, 1800, 9000)
    assert summed.as_hours() == {"reserved": 3.0, "used": 0.5, "idle": 2.5}
    assert cost.total([]) == GpuSeconds()


def test_gpus_per_member():
    assert cost.gpus_per_member(gang_spec(resources=MemberResources(gpus=4))) == 4
    in_template = {
        "spec": {"containers": [{"name": "w", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    }
    assert cost.gpus_per_member(gang_spec(resources=MemberResources(), pod_template=in_template)) == 2
    assert cost.gpus_per_member(gang_spec(resources=MemberResources())) == 0

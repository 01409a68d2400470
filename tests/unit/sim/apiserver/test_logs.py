"""Pod logs: selection options and follow streams, on an injected wall clock."""

from __future__ import annotations

import asyncio

from gang_sim.apiserver.logs import PodLogs, format_timestamp


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_tail_since_and_timestamps():
    clock = FakeClock()
    logs = PodLogs(clock)
    logs.append("ns", "p", "c", "one\ntwo\n")
    clock.now += 100
    logs.append("ns", "p", "c", "three")
    assert logs.read("ns", "p", "c") == "one\ntwo\nthree\n"
    assert logs.read("ns", "p", "c", tail_lines=2) == "two\nthree\n"
    assert logs.read("ns", "p", "c", tail_lines=0) == ""
    assert logs.read("ns", "p", "c", since_seconds=10) == "three\n"
    assert logs.read("ns", "p", "c", tail_lines=1, timestamps=True) == "2027-01-15T08:01:40.000000000Z three\n"
    assert logs.read("ns", "other", "c") == ""


def test_timestamp_format_has_nanoseconds():
    assert format_timestamp(1_800_000_000.25) == "2027-01-15T08:00:00.250000000Z"


async def test_follow_yields_existing_then_new_lines_until_closed():
    logs = PodLogs(FakeClock())
    logs.append("ns", "p", "c", "before")
    chunks: list[str] = []

    async def follow() -> None:
        async for chunk in logs.follow("ns", "p", "c"):
            chunks.append(chunk)

    task = asyncio.create_task(follow())
    await asyncio.sleep(0)
    logs.append("ns", "p", "c", "after")
    await asyncio.sleep(0)
    logs.close("ns", "p", "c")
    await asyncio.wait_for(task, 1)
    assert "".join(chunks) == "before\nafter\n"


async def test_follow_of_a_deleted_pod_ends():
    logs = PodLogs(FakeClock())
    task = asyncio.create_task(_drain(logs))
    await asyncio.sleep(0)  # the follower is now waiting for lines
    logs.forget_pod("ns", "p")
    assert await asyncio.wait_for(task, 1) == ""


async def _drain(logs: PodLogs) -> str:
    return "".join([chunk async for chunk in logs.follow("ns", "p", "c")])

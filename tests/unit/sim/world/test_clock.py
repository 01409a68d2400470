"""Simulated time: ScaledClock scales sleeps, ManualClock wakes sleepers only when advanced."""

from __future__ import annotations

import asyncio

import pytest

from gang_sim.world.clock import ManualClock, ScaledClock


async def test_manual_clock_wakes_sleepers_in_deadline_order() -> None:
    clock = ManualClock()
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    tasks = [asyncio.create_task(sleeper("late", 600)), asyncio.create_task(sleeper("early", 10))]
    await asyncio.sleep(0)
    assert clock.next_deadline() == 10
    clock.advance(9)
    await asyncio.sleep(0)
    assert woke == []
    clock.advance(1)
    await asyncio.sleep(0)
    assert woke == [("early", 10)]
    clock.advance(1000)
    await asyncio.gather(*tasks)
    assert woke == [("early", 10), ("late", 1010)]


async def test_run_for_steps_through_chained_timers() -> None:
    clock = ManualClock()
    seen: list[float] = []

    async def chain() -> None:
        for _ in range(3):
            await clock.sleep(60)
            seen.append(clock.now())

    task = asyncio.create_task(chain())
    await asyncio.sleep(0)
    assert await clock.run_for(200) == 200
    await task
    assert seen == [60, 120, 180]


async def test_cancelled_sleeper_is_skipped() -> None:
    clock = ManualClock()
    task = asyncio.ensure_future(clock.sleep(5))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.next_deadline() is None
    clock.advance(10)


def test_manual_clock_refuses_to_go_backwards() -> None:
    with pytest.raises(ValueError, match="backwards"):
        ManualClock().advance(-1)


async def test_scaled_clock_runs_simulated_time_faster() -> None:
    clock = ScaledClock(time_scale=1000)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await clock.sleep(100)  # 0.1 real seconds
    assert loop.time() - started < 5
    assert clock.now() >= 100
    assert clock.describe()["timeScale"] == 1000


def test_scaled_clock_rejects_non_positive_scale() -> None:
    with pytest.raises(ValueError, match="time_scale"):
        ScaledClock(0)

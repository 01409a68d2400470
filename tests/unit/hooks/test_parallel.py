"""``hooks.parallel.bounded_gather``: at most ``limit`` calls at once, results in order, and the
first failure stops further calls from starting while the running ones finish."""

from __future__ import annotations

import asyncio

import pytest

from airflow_provider_gang.hooks.parallel import bounded_gather


class Calls:
    """Calls that each wait for one loop turn, recording what runs at once and what started."""

    def __init__(self, failing: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.failing, self.running, self.most, self.started, self.finished = failing, 0, 0, [], []

    def call(self, index: int):
        async def run() -> int:
            self.started.append(index)
            self.running += 1
            self.most = max(self.most, self.running)
            await asyncio.sleep(0)
            self.running -= 1
            if index in self.failing:
                raise RuntimeError(f"call {index} failed")
            self.finished.append(index)
            return index * 10

        return run


@pytest.mark.parametrize(("limit", "most"), [(1, 1), (4, 4), (None, 20), (64, 20)])
async def test_results_come_in_order_with_at_most_limit_calls_at_once(limit, most):
    calls = Calls()
    assert await bounded_gather([calls.call(index) for index in range(20)], limit=limit) == [
        index * 10 for index in range(20)
    ]
    assert calls.most == most
    assert calls.started == list(range(20))


async def test_the_first_failure_stops_new_calls_and_lets_running_ones_finish():
    calls = Calls(failing={5})
    with pytest.raises(RuntimeError, match="call 5 failed"):
        await bounded_gather([calls.call(index) for index in range(20)], limit=4)
    assert max(calls.started) < 10  # calls 0..3, then 4..7 at once: 5 fails, no more start
    assert set(calls.finished) == set(calls.started) - {5}


async def test_nothing_to_do_is_nothing_done():
    assert await bounded_gather([], limit=8) == []

"""``eventually`` and ``eventually_async``: the first truthy value, or an AssertionError naming the wait
and the last value or exception seen once the timeout has passed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from gang_sim.testing.eventually import eventually, eventually_async


def answers(*values: Any) -> Callable[[], Any]:
    """A condition returning ``values`` one per call (raising those that are exceptions), then the last."""
    remaining = list(values)

    def condition() -> Any:
        value = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        if isinstance(value, Exception):
            raise value
        return value

    return condition


def test_returns_the_first_truthy_value() -> None:
    assert eventually(answers(None, [], {"name": "p"}), timeout=10, what="p", interval=0.001) == {"name": "p"}


def test_an_exception_is_not_yet() -> None:
    assert eventually(answers(KeyError("p"), "found"), timeout=10, what="p", interval=0.001) == "found"


def test_the_timeout_names_the_wait_and_the_last_value() -> None:
    with pytest.raises(AssertionError) as raised:
        eventually(answers(KeyError("p"), ""), timeout=0.05, what="the pod's log", interval=0.001)
    assert str(raised.value) == "timed out after 0.05 s waiting for the pod's log; last value: ''"
    assert raised.value.__cause__ is None


def test_the_timeout_names_the_last_exception_and_chains_it() -> None:
    missing = KeyError("p")
    with pytest.raises(AssertionError) as raised:
        eventually(answers([], missing), timeout=0.05, what="the pod", interval=0.001)
    assert str(raised.value) == "timed out after 0.05 s waiting for the pod; last exception: KeyError: 'p'"
    assert raised.value.__cause__ is missing


def test_the_last_call_is_at_the_deadline_not_an_interval_later() -> None:
    calls: list[float] = []
    started = time.monotonic()
    with pytest.raises(AssertionError):
        eventually(lambda: calls.append(time.monotonic()), timeout=0.1, what="nothing", interval=30)
    assert len(calls) == 2 and calls[1] - started >= 0.1 and time.monotonic() - started < 10


async def test_async_returns_the_first_truthy_value_of_an_async_condition() -> None:
    sync = answers(None, KeyError("p"), 0, "found")

    async def condition() -> Any:
        return sync()

    assert await eventually_async(condition, timeout=10, what="p", interval=0.001) == "found"


async def test_async_keeps_the_loop_running_for_a_plain_condition() -> None:
    ready = asyncio.Event()
    setter = asyncio.get_running_loop().call_later(0.01, ready.set)
    try:
        assert await eventually_async(ready.is_set, timeout=10, what="the event", interval=0.001) is True
    finally:
        setter.cancel()


async def test_async_timeout_names_the_last_value() -> None:
    async def condition() -> list[str]:
        return []

    with pytest.raises(AssertionError) as raised:
        await eventually_async(condition, timeout=0.05, what="the views", interval=0.001)
    assert str(raised.value) == "timed out after 0.05 s waiting for the views; last value: []"


async def test_async_timeout_names_the_last_exception_and_chains_it() -> None:
    refused = ConnectionRefusedError("refused")

    async def condition() -> bool:
        raise refused

    with pytest.raises(AssertionError) as raised:
        await eventually_async(condition, timeout=0.05, what="the server", interval=0.001)
    assert str(raised.value) == (
        "timed out after 0.05 s waiting for the server; last exception: ConnectionRefusedError: refused"
    )
    assert raised.value.__cause__ is refused

"""The client-side rate limit (token bucket) on a fake clock, its options, and the client taking a
token per attempt and holding at most ``max_parallel_requests`` requests in flight."""

from __future__ import annotations

import asyncio
import random

import pytest

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import MAX_PARALLEL_REQUESTS, ClientOptions
from airflow_provider_gang.kube.rate_limit import TokenBucket
from airflow_provider_gang.kube.resources import CONFIG_MAPS
from airflow_provider_gang.kube.retry import RetryPolicy
from airflow_provider_gang.kube.settings import ConnectionSettings


class FakeTime:
    """A clock that moves only when a sleep is awaited (by exactly the time asked)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


async def test_a_full_bucket_lets_a_burst_through_then_paces_at_qps():
    time = FakeTime()
    bucket = TokenBucket(qps=10, burst=3, clock=time.clock, sleep=time.sleep)
    waits = [await bucket.acquire() for _ in range(6)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3:] == pytest.approx([0.1, 0.1, 0.1])
    assert time.now == pytest.approx(100.3)


async def test_an_idle_bucket_refills_up_to_burst_and_no_further():
    time = FakeTime()
    bucket = TokenBucket(qps=2, burst=4, clock=time.clock, sleep=time.sleep)
    for _ in range(4):
        await bucket.acquire()
    assert bucket.available() == pytest.approx(0.0)
    time.now += 1.0
    assert bucket.available() == pytest.approx(2.0)
    time.now += 3600.0
    assert bucket.available() == pytest.approx(4.0)
    assert [await bucket.acquire() for _ in range(4)] == [0.0] * 4
    assert time.sleeps == []


async def test_concurrent_waiters_are_served_in_arrival_order_one_token_apart():
    time = FakeTime()
    started: list[float] = []

    async def sleep(seconds: float) -> None:  # every waiter sleeps from the same moment
        time.sleeps.append(seconds)
        await asyncio.sleep(0)

    bucket = TokenBucket(qps=4, burst=1, clock=time.clock, sleep=sleep)

    async def one() -> None:
        started.append(await bucket.acquire())

    await asyncio.gather(*(one() for _ in range(5)))
    assert started == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])


async def test_a_cancelled_waiter_gives_its_token_back():
    time = FakeTime()
    blocked = asyncio.Event()

    async def sleep(seconds: float) -> None:
        time.sleeps.append(seconds)
        await blocked.wait()

    bucket = TokenBucket(qps=1, burst=1, clock=time.clock, sleep=sleep)
    await bucket.acquire()
    waiter = asyncio.ensure_future(bucket.acquire())
    await asyncio.sleep(0)
    assert bucket.available() == pytest.approx(-1.0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert bucket.available() == pytest.approx(0.0)


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 1), (5, 0)], ids=["no-qps", "negative-qps", "no-burst"])
def test_a_bucket_needs_a_rate_and_a_capacity(qps, burst):
    with pytest.raises(ValueError, match=r"qps|burst"):
        TokenBucket(qps=qps, burst=burst)


def test_client_options_default_to_kueues_limit_and_zero_qps_turns_it_off():
    options = ClientOptions()
    assert (options.qps, options.burst, options.max_parallel_requests) == (1000.0, 1000, 32)
    bucket = options.rate_limiter()
    assert bucket is not None and (bucket.qps, bucket.burst) == (1000.0, 1000)
    assert ClientOptions(qps=0).rate_limiter() is None
    assert ClientOptions.from_dict(options.to_dict()) == options


@pytest.mark.parametrize(
    "values",
    [
        {"burst": 0},
        {"burst": 2.5},
        {"max_parallel_requests": 0},
        {"max_parallel_requests": MAX_PARALLEL_REQUESTS + 1},
        {"qps": -1},
    ],
    ids=["burst-zero", "burst-fraction", "parallel-zero", "parallel-above-pool", "qps-negative"],
)
def test_client_options_refuse_a_limit_that_cannot_work(values):
    with pytest.raises(ValueError, match=next(iter(values))):
        ClientOptions(**values)


async def test_every_attempt_takes_a_token_and_requests_in_flight_stay_bounded(sim, connection):
    """Five GETs failing once each (503) through a client allowed 2 in flight: 10 attempts, 10
    tokens (the bucket's clock stands still: nothing refills); the emulator's latency keeps each
    request in flight long enough to overlap."""
    sim.set_faults("get/configmaps:1.0:503:count:5,latency:0.05")
    bucket = TokenBucket(qps=1, burst=1000, clock=lambda: 0.0)
    in_flight = {"now": 0, "most": 0}

    async def no_backoff(seconds: float) -> None:
        await asyncio.sleep(0)

    async with await KubeClient.connect(
        ConnectionSettings.from_dict(connection),
        sleep=no_backoff,
        retry=RetryPolicy(attempts=3, rng=random.Random(1)),
        rate_limiter=bucket,
        max_parallel_requests=2,
    ) as client:
        send_once = client._send_once

        async def counted(*arguments: object) -> object:
            in_flight["now"] += 1
            in_flight["most"] = max(in_flight["most"], in_flight["now"])
            try:
                return await send_once(*arguments)  # type: ignore[arg-type]
            finally:
                in_flight["now"] -= 1

        client._send_once = counted  # type: ignore[method-assign]
        for index in range(5):
            await client.create(CONFIG_MAPS, {"metadata": {"name": f"c{index}"}, "data": {}})
        sim.reset_metrics()
        bucket_before = bucket.available()
        await asyncio.gather(*(client.get(CONFIG_MAPS, f"c{index}") for index in range(5)))
    assert sim.metrics()["codes"] == {"200": 5, "503": 5}
    assert bucket_before - bucket.available() == 10.0
    assert in_flight["most"] == 2

"""``reservation.clock``: the system clock, and a test's clock installed in its place."""

from __future__ import annotations

import time

from airflow_provider_gang.reservation import clock


class StoppedClock:
    def now(self) -> float:
        return 1000.0

    def real_seconds(self, seconds: float) -> float:
        return 0.0


def test_the_system_clock_is_unix_time_and_waits_in_real_seconds() -> None:
    system = clock.SystemClock()
    before = time.time()
    assert before <= system.now() <= time.time()
    assert (system.real_seconds(2.5), system.real_seconds(-1.0)) == (2.5, 0.0)


def test_the_process_clock_is_the_system_clock_until_one_is_installed() -> None:
    assert isinstance(clock.current(), clock.SystemClock)
    stopped = StoppedClock()
    previous = clock.install(stopped)
    try:
        assert clock.current() is stopped and clock.current().now() == 1000.0
    finally:
        assert clock.install(previous) is stopped
    assert clock.current() is previous

"""``triggers.wakeups.WakeSchedule``: deadlines in the decision clock's time, the tick in real time."""

from __future__ import annotations

from airflow_provider_gang.triggers.wakeups import WakeSchedule


class SteppedClock:
    """A decision clock a test moves; a waiter polls it every ``poll`` real seconds."""

    def __init__(self, now: float, poll: float = 0.01) -> None:
        self.moment, self.poll = now, poll

    def now(self) -> float:
        return self.moment

    def real_seconds(self, seconds: float) -> float:
        return min(max(seconds, 0.0), self.poll)


class RealTime:
    """The real time the tick is measured in, moved by the test."""

    def __init__(self) -> None:
        self.moment = 0.0

    def __call__(self) -> float:
        return self.moment


def test_deadlines_pass_in_clock_time_only() -> None:
    clock, real = SteppedClock(100.0), RealTime()
    schedule = WakeSchedule(clock, [160.0, None, 130.0], tick=None, real_time=real)
    assert schedule.passed() == 0
    assert schedule.timeout() == 0.01  # the clock's poll, not 30 real seconds
    real.moment = 60.0  # real time passes, clock time does not
    assert schedule.passed() == 0 and not schedule.waited(changed=False)
    clock.moment = 170.0
    assert schedule.passed() == 2 and schedule.timeout() is None


def test_the_tick_is_real_time_and_restarts_after_a_change_or_a_tick() -> None:
    clock, real = SteppedClock(100.0), RealTime()
    schedule = WakeSchedule(clock, [], tick=5.0, real_time=real)
    real.moment = 2.0
    assert schedule.timeout() == 3.0
    assert not schedule.waited(changed=False)  # woken early: no tick owed
    real.moment = 5.0
    assert schedule.waited(changed=False)  # the tick passed with no change
    assert schedule.timeout() == 5.0 and not schedule.waited(changed=False)  # ... and restarted
    real.moment = 12.0
    assert not schedule.waited(changed=True)  # a change came: the caller looks at it, the tick restarts
    assert schedule.timeout() == 5.0


def test_a_due_deadline_takes_the_place_of_a_tick() -> None:
    clock, real = SteppedClock(100.0), RealTime()
    schedule = WakeSchedule(clock, [120.0], tick=1.0, real_time=real)
    assert schedule.timeout() == 0.01  # the poll comes before the tick
    real.moment, clock.moment = 2.0, 125.0
    assert not schedule.waited(changed=False)  # the deadline, not the tick, wakes the caller
    assert schedule.passed() == 1


def test_every_recurs_in_clock_time_from_the_moment_it_is_reported() -> None:
    clock, real = SteppedClock(100.0), RealTime()
    schedule = WakeSchedule(clock, [], tick=None, every=30.0, real_time=real)
    real.moment = 1000.0
    assert schedule.passed() == 0  # real time alone never brings it
    clock.moment = 130.0
    assert not schedule.waited(changed=False) and schedule.passed() == 1
    clock.moment = 150.0
    assert schedule.passed() == 0  # the next one is at 160
    clock.moment = 175.0
    assert schedule.passed() == 1 and schedule.passed() == 0

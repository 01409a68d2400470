"""A member lost mid-run keeps the time it ran (accounting counts it as used, not idle)."""

from __future__ import annotations

from airflow_provider_gang.reservation import cost, member_history
from airflow_provider_gang.reservation.members import MemberState, MemberStatus


def test_a_lost_member_keeps_the_time_it_ran() -> None:
    running = (
        MemberStatus(0, MemberState.RUNNING, started_at=100.0),
        MemberStatus(1, MemberState.RUNNING, started_at=110.0),
    )
    started = member_history.remember({}, (*running, MemberStatus(2, MemberState.PENDING)))
    assert started == {0: 100.0, 1: 110.0}  # a member not started yet adds nothing
    final = (
        MemberStatus(0, MemberState.RUNNING, started_at=100.0),
        MemberStatus(1, MemberState.MISSING),
        MemberStatus(2, MemberState.LOST),
    )  # rank 2 never started
    carried = member_history.carry_forward(started, final, now=200.0)
    assert carried[1] == MemberStatus(1, MemberState.MISSING, started_at=110.0, finished_at=200.0)
    assert carried[0] == final[0] and carried[2] == final[2]
    used = cost.try_cost(gpus=1, members_reserved=2, reserved_at=100.0, released_at=200.0, members=carried[:2])
    assert used.used == 100.0 + 90.0 and used.idle == 10.0


def test_a_lost_member_with_its_own_finish_keeps_it() -> None:
    lost = (MemberStatus(0, MemberState.LOST, finished_at=150.0),)
    assert member_history.carry_forward({0: 100.0}, lost, now=200.0)[0].finished_at == 150.0


def test_the_run_memory_gives_a_member_lost_after_an_earlier_observation_the_time_it_ran() -> None:
    memory = member_history.RunMemory(read_checkpoints=False)
    memory.remember(
        (MemberStatus(0, MemberState.RUNNING, started_at=100.0), MemberStatus(1, MemberState.RUNNING, started_at=105.0))
    )
    memory.remember(
        (MemberStatus(0, MemberState.FAILED, started_at=100.0, finished_at=150.0), MemberStatus(1, MemberState.MISSING))
    )
    ended = memory.ended(
        (
            MemberStatus(0, MemberState.FAILED, started_at=100.0, finished_at=150.0),
            MemberStatus(1, MemberState.MISSING),
            MemberStatus(2, MemberState.LOST),
        ),
        now=160.0,
    )
    assert ended == (
        MemberStatus(0, MemberState.FAILED, started_at=100.0, finished_at=150.0),
        MemberStatus(1, MemberState.MISSING, started_at=105.0, finished_at=160.0),
        MemberStatus(2, MemberState.LOST),
    )

"""Spot preemption as its own reason: how a run's members and nodes decide it, and what the run's
memory keeps of it beside the latest checkpoint."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_gang.reservation import decision, member_history, members
from airflow_provider_gang.reservation.checkpoint import CheckpointReport
from airflow_provider_gang.reservation.decision import Observed, Policy, Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import ReservationMode
from tests.builders import T0, member


def _run(*pods, size=2, preempted=frozenset(), shutting_down=frozenset()):
    return Observed(
        mode=ReservationMode.PROVISIONING_REQUEST,
        stage=Stage.RUN,
        size=size,
        started_at=T0,
        pods=[item.obj() for item in pods],
        spot_preempted_ranks=preempted,
        nodes_shutting_down=shutting_down,
    )


SPOT_CASES = [
    (
        "shutting-down-waits-for-the-last-words",
        _run(member(0).on_spot().running(), member(1).on_spot().shutting_down()),
        Phase.RUNNING,
        False,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "a-peer-on-the-node-still-running-is-waited-for",
        _run(member(0).on_spot().container_running(), member(1).on_spot().shut_down()),
        Phase.RUNNING,
        False,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "a-peer-on-another-node-is-not-waited-for",
        _run(member(0).on_spot().container_running().bound("node-2"), member(1).on_spot().shut_down()),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "shut-down-is-spot-preempted",
        _run(member(0).on_spot().shut_down(), member(1).on_spot().shut_down()),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "outranks-the-peer-that-failed-after-it",
        _run(member(0).on_spot().failed(), member(1).on_spot().shut_down()),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "remembered-after-the-pod-went",
        _run(member(0).on_spot().failed(), preempted=frozenset({1})),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "on-demand-node-shutdown-is-member-lost",
        _run(member(0).running(), member(1).shut_down()),
        Phase.FAILED,
        True,
        Reason.MEMBER_LOST,
    ),
    (
        "a-peer-failing-first-waits-for-the-member-on-the-tainted-node",
        _run(
            member(0).on_spot().failed().bound("node-2"),
            member(1).on_spot().container_running(),
            shutting_down=frozenset({"node-1"}),
        ),
        Phase.RUNNING,
        False,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "a-stopped-member-on-the-tainted-node-is-spot-preempted-before-its-own-status-says-so",
        _run(
            member(0).on_spot().failed().bound("node-2"),
            member(1).on_spot().failed(143),
            shutting_down=frozenset({"node-1"}),
        ),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "a-member-that-succeeded-on-a-tainted-node-is-no-preemption",
        _run(
            member(0).on_spot().failed().bound("node-2"),
            member(1).on_spot().succeeded(),
            shutting_down=frozenset({"node-1"}),
        ),
        Phase.FAILED,
        True,
        Reason.MEMBER_FAILED,
    ),
    (
        "an-on-demand-member-on-a-tainted-node-is-no-spot-preemption",
        _run(member(0).failed().bound("node-2"), member(1).failed(143), shutting_down=frozenset({"node-1"})),
        Phase.FAILED,
        True,
        Reason.MEMBER_FAILED,
    ),
    (
        "a-member-that-finished-first-is-no-preemption",
        _run(
            member(0).on_spot().succeeded(),
            member(1).on_spot().succeeded().condition("DisruptionTarget", reason="TerminationByKubelet"),
        ),
        Phase.SUCCEEDED,
        True,
        Reason.ALL_SUCCEEDED,
    ),
]


@pytest.mark.parametrize(
    ("observed", "phase", "terminal", "reason"), [c[1:] for c in SPOT_CASES], ids=[c[0] for c in SPOT_CASES]
)
def test_spot_preemption_is_its_own_reason(observed, phase, terminal, reason) -> None:
    decided = decision.decide(observed, now=T0 + 10, policy=Policy())
    assert (decided.phase, decided.terminal, decided.reason) == (phase, terminal, reason)


def test_the_run_memory_keeps_preemptions_and_the_latest_checkpoint_and_warns_once() -> None:
    memory = member_history.RunMemory()
    talking = member(0).on_spot().failed().obj()
    talking["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = '{"checkpoint_step": 8, "step": 9}'
    garbled = member(1).on_spot().shut_down(message="{oops").obj()
    observed = dataclasses.replace(_run(), pods=[talking, garbled])
    seen, warnings = memory.see(observed)
    assert seen.spot_preempted_ranks == frozenset({1})
    assert memory.checkpoint == CheckpointReport(8, 9, "gang-t1-abc-0", 0)
    assert len(warnings) == 1 and "gang-t1-abc-1" in warnings[0]
    later, warnings = memory.see(dataclasses.replace(_run(), pods=[garbled]))
    assert warnings == [] and later.spot_preempted_ranks == frozenset({1})
    assert memory.checkpoint == CheckpointReport(8, 9, "gang-t1-abc-0", 0)


def test_without_a_checkpoint_termination_messages_are_not_read() -> None:
    memory = member_history.RunMemory(read_checkpoints=False)
    garbled = member(0).on_spot().shut_down(message="{oops").obj()
    seen, warnings = memory.see(dataclasses.replace(_run(), pods=[garbled]))
    assert (warnings, memory.checkpoint, seen.spot_preempted_ranks) == ([], None, frozenset({0}))


def test_a_member_gone_with_a_node_found_shutting_down_was_preempted() -> None:
    """Rank 1 ran on spot node-1 and is gone (its node deleted); rank 0 failed on node-2 after it."""
    memory = member_history.RunMemory(read_checkpoints=False)
    peer = member(0).on_spot().failed().bound("node-2").obj()
    memory.see(dataclasses.replace(_run(), pods=[peer, member(1).on_spot().container_running().obj()]))
    gone = dataclasses.replace(_run(), pods=[peer])
    seen, _ = memory.see(gone)
    assert decision.decide(seen, now=T0 + 10, policy=Policy()).reason is Reason.MEMBER_FAILED
    memory.saw_nodes_shutting_down(frozenset({"node-1"}))
    seen, _ = memory.see(gone)
    assert (seen.spot_preempted_ranks, seen.nodes_shutting_down) == (frozenset({1}), frozenset({"node-1"}))
    assert decision.decide(seen, now=T0 + 10, policy=Policy()).reason is Reason.SPOT_PREEMPTED


def test_spot_nodes_are_those_of_bound_spot_members() -> None:
    pods = [
        member(0).on_spot().running().obj(),
        member(1).running().obj(),
        member(2).on_spot().obj(),
        member(5).on_spot().running().obj(),
        member(None).on_spot().running().obj(),
    ]
    assert members.spot_nodes(pods, size=4) == {0: "node-1"}


def test_a_rank_without_a_pod_gets_a_note_saying_why_its_log_is_missing() -> None:
    assert members.missing_log_note(0, node_removed=True) == "(rank 0: log unavailable - its node was removed)"
    assert members.missing_log_note(3, node_removed=False) == (
        "(rank 3: log unavailable - its pod was removed before its log was read)"
    )

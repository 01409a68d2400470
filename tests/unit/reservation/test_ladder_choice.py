"""Transient failures repeat the step; ``OtherCluster`` moves the gang and starts over from the
configured spec. Pure: the choice, the plan it gives and the record a try leaves."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_gang.reservation import fallback, ladder_choice, ladder_format
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.fallback import OnDemand, OtherCluster, OtherZone, RetryAsIs, ShrinkTo
from airflow_provider_gang.reservation.ladder_choice import TryOutcome
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from airflow_provider_gang.reservation.tries import results
from airflow_provider_gang.reservation.tries.plan import NoTry, plan_try
from tests.builders import gang_event, gang_spec

R = Reason
SHRINK = (ShrinkTo(2),)


@pytest.mark.parametrize(
    "reason", [R.CLUSTER_UNREACHABLE, R.MALFORMED_ANSWER, R.UNEXPECTED_ERROR, R.RESERVATION_GONE, R.MEMBER_LOST]
)
def test_a_transient_failure_no_step_answers_repeats_the_configured_gang(reason: Reason) -> None:
    choice = ladder_choice.choose_step(SHRINK, 2, [TryOutcome(1, None, reason)])
    assert (choice.step, choice.step_index, choice.exhausted, choice.repeats) == (None, None, False, True)
    assert choice.explanation.startswith(
        f"try 2: repeating step 'as configured' after a transient failure ({reason.value}) of try 1"
    )


def test_a_repeated_step_is_not_used_up_and_capacity_still_walks_the_ladder() -> None:
    history = [
        TryOutcome(1, None, R.CAPACITY_NOT_FOUND),
        TryOutcome(2, 0, R.CLUSTER_UNREACHABLE),
        TryOutcome(3, 0, R.MALFORMED_ANSWER, repeated=True),
    ]
    again = ladder_choice.choose_step(SHRINK, 4, history)
    assert (again.step_index, again.repeats) == (0, True)
    assert "repeating step 1 (shrink to 2 members) after a transient failure (malformed_answer)" in again.explanation
    ladder = (ShrinkTo(2), OtherZone("b"))
    walked = ladder_choice.choose_step(ladder, 4, [*history[:2], TryOutcome(3, 0, R.DEADLINE, repeated=True)])
    assert (walked.step_index, walked.repeats) == (1, False)  # step 1 was used once, by try 2


def test_capacity_and_member_failures_still_exhaust_the_ladder() -> None:
    for reason in (R.CAPACITY_REVOKED, R.BOOKING_EXPIRED, R.SPOT_PREEMPTED, R.MEMBER_FAILED, R.PREEMPTED):
        assert ladder_choice.choose_step(SHRINK, 2, [TryOutcome(1, None, reason)]).exhausted, reason


def test_a_member_lost_with_its_node_is_capacity_not_transient() -> None:
    lost_node = TryOutcome(1, None, R.MEMBER_LOST, node_reclaimed=True)
    assert not ladder_choice.is_transient(lost_node)
    assert ladder_choice.choose_step(SHRINK, 2, [lost_node]).exhausted
    assert ladder_choice.choose_step((OnDemand(),), 2, [lost_node]).step_index == 0


def test_a_step_that_answers_the_transient_reason_comes_first() -> None:
    ladder = (ShrinkTo(2), RetryAsIs())
    choice = ladder_choice.choose_step(ladder, 2, [TryOutcome(1, None, R.CLUSTER_UNREACHABLE)])
    assert (choice.step_index, choice.repeats) == (1, False)


def test_a_repeat_of_a_step_beyond_a_shorter_ladder_repeats_the_configured_gang() -> None:
    odd = ladder_choice.choose_step(SHRINK, 2, [TryOutcome(1, 7, R.CLUSTER_UNREACHABLE)])
    assert (odd.step_index, odd.repeats) == (None, True)


def test_the_summary_says_which_tries_repeated() -> None:
    history = [TryOutcome(1, None, R.CLUSTER_UNREACHABLE), TryOutcome(2, None, R.DEADLINE, repeated=True)]
    assert ladder_choice.summarize(SHRINK, history) == (
        "try 1 (as configured): cluster_unreachable; try 2 (as configured, repeated): deadline"
    )
    assert TryOutcome.from_dict(history[1].to_dict()) == history[1]


def _record(attempt: int, outcome: Reason, step_index: int | None = None, **fields: Any) -> TryRecord:
    return TryRecord(
        attempt=attempt,
        gang=f"g-t{attempt}",
        step="",
        step_index=step_index,
        mode="provisioning_request",
        size=4,
        outcome=outcome.value,
        message="",
        retryable=True,
        **fields,
    )


def _plan(try_number: int, records: list[TryRecord], ladder: Any) -> Any:
    ti = SimpleNamespace(dag_id="nightly", task_id="train", run_id="r1", map_index=-1, try_number=try_number)
    return plan_try(
        ti=ti,
        records=records,
        ladder=ladder,
        configured=gang_spec(zone="zone-a", min_size=2),
        reservation_timeout_seconds=600,
        start_deadline=None,
        now=1_800_000_000.0,
        kubernetes_conn_id="cluster_a",
    )


def test_a_repeating_plan_keeps_the_failed_tries_spec_and_says_so() -> None:
    records = [_record(1, R.CAPACITY_NOT_FOUND), _record(2, R.CLUSTER_UNREACHABLE, 0)]
    chosen, explanation = _plan(3, records, SHRINK)
    assert (chosen.step_index, chosen.repeats, chosen.spec.size) == (0, True, 2)
    assert chosen.step == "shrink to 2 members (repeated after a transient failure)"
    assert "repeating step 1 (shrink to 2 members) after a transient failure (cluster_unreachable)" in explanation
    records.append(_record(3, R.CLUSTER_UNREACHABLE, 0, repeated=True))
    again, _ = _plan(4, records, SHRINK)
    assert (again.step_index, again.repeats, again.spec.size) == (0, True, 2)
    with pytest.raises(NoTry) as caught:
        _plan(5, [*records, _record(4, R.DEADLINE, 0, repeated=True)], SHRINK)
    assert caught.value.reason is R.LADDER_EXHAUSTED
    assert "try 4 (step 1: shrink to 2 members, repeated): deadline" in caught.value.message


LADDER = (OtherZone("zone-c"), OtherCluster("cluster_b", namespace="training"), OtherZone("zone-b"))


def test_other_cluster_starts_over_from_the_configured_spec_and_names_the_cluster() -> None:
    first, _ = _plan(1, [], LADDER)
    assert first.kubernetes_conn_id == "cluster_a"
    records = [_record(1, R.CAPACITY_NOT_FOUND), _record(2, R.CAPACITY_NOT_FOUND, 0)]
    moved, explanation = _plan(3, records, LADDER)
    assert (moved.step_index, moved.kubernetes_conn_id) == (1, "cluster_b")
    assert (moved.spec.zone, moved.spec.namespace) == ("zone-a", "training")  # zone-c was cluster A's
    assert "step 2 (other cluster cluster_b (namespace training)) because try 2 ended with" in explanation
    later, _ = _plan(4, [*records, _record(3, R.DEADLINE, 1)], LADDER)
    assert (later.kubernetes_conn_id, later.spec.zone, later.spec.namespace) == ("cluster_b", "zone-b", "training")


def test_other_cluster_answers_an_unreachable_cluster_and_capacity_by_default() -> None:
    step = OtherCluster("cluster_b")
    assert {R.CLUSTER_UNREACHABLE, R.CAPACITY_NOT_FOUND, R.DEADLINE, R.KUEUE_REJECTED} <= step.reasons
    assert R.MEMBER_FAILED not in step.reasons
    choice = ladder_choice.choose_step((step,), 2, [TryOutcome(1, None, R.CLUSTER_UNREACHABLE)])
    assert (choice.step_index, choice.repeats) == (0, False)
    assert step.describe() == "other cluster cluster_b"
    assert step.apply(gang_spec()) == gang_spec()


def test_cluster_of_is_the_last_other_cluster_used() -> None:
    ladder = (OtherCluster("b"), ShrinkTo(2), OtherCluster("c"))
    assert fallback.cluster_of(ladder, [None]) is None
    assert fallback.cluster_of(ladder, [None, 0, 1]) == ladder[0]
    assert fallback.cluster_of(ladder, [None, 0, 1, 2]) == ladder[2]


@pytest.mark.parametrize(
    ("step", "says"),
    [
        (OtherCluster(""), "kubernetes_conn_id must be an Airflow connection id"),
        (OtherCluster("has space"), "got 'has space'"),
        (OtherCluster(3), "got 3"),  # type: ignore[arg-type]
        (OtherCluster("b", namespace="Not_A_Label"), "namespace must be a DNS-1123 label, got 'Not_A_Label'"),
    ],
)
def test_a_bad_other_cluster_is_refused_when_the_dag_is_parsed(step: OtherCluster, says: str) -> None:
    with pytest.raises(GangSpecError) as caught:
        fallback.check_ladder((ShrinkTo(2), step), gang_spec(min_size=2))
    assert caught.value.field == "fallbacks" and "step 2" in str(caught.value) and says in str(caught.value)


def test_other_cluster_is_stored_and_read_back_and_never_warned_as_a_no_op() -> None:
    plain = ladder_format.ladder_to_plain(LADDER)
    assert plain[1] == {
        "step": "OtherCluster",
        "applies_to": [],
        "kubernetes_conn_id": "cluster_b",
        "namespace": "training",
    }
    assert ladder_format.ladder_from_plain(plain) == LADDER
    fallback.check_ladder(LADDER, gang_spec())
    assert fallback.no_op_steps((OtherCluster("b"),), gang_spec()) == []


def test_the_record_names_the_cluster_and_whether_a_lost_members_node_went() -> None:
    chosen, _ = _plan(1, [], LADDER)
    assert isinstance(chosen, TryPlan)
    state = TryState(plan=chosen)
    lost = MemberStatus(rank=1, state=MemberState.LOST, reason="DeletionByPodGC")
    deleted = MemberStatus(rank=0, state=MemberState.LOST, reason="Deleted")
    for statuses, reclaimed in (([deleted], False), ([deleted, lost], True)):
        event = gang_event(R.MEMBER_LOST, started_at=1.0, event_at=2.0, members=tuple(statuses))
        ending = results.TryEnding.of_event(event)
        record = results.try_record(state, None, event, ending, gpus=1, now=3.0)
        assert (record.kubernetes_conn_id, record.namespace) == ("cluster_a", "ml")
        assert (record.node_reclaimed, record.repeated) == (reclaimed, False)
    records = [dataclasses.replace(record, attempt=1), dataclasses.replace(record, attempt=2, kubernetes_conn_id="b")]
    assert " | as configured on cluster_a | " in results.story(records)[1]
    assert " | as configured | " in results.story(records[:1])[1]

"""The differential test's reductions (tests/real/sequences.py) and its explained-differences check
(tests/real/explained.py), on hand-written recordings."""

from __future__ import annotations

from typing import Any

from tests.real import explained, sequences

STAMP = "2026-01-01T00:00:00Z"


def _workload(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"uid": "w", "creationTimestamp": STAMP},
        "status": {
            "conditions": [{"type": kind, "status": status, "reason": reason} for kind, status, reason in conditions]
        },
    }


WAIT = ("PodsReady", "False", "WaitForStart")
RESERVED = ("QuotaReserved", "True", "QuotaReserved")
ADMITTED = ("Admitted", "True", "Admitted")
STARTED = ("PodsReady", "True", "Started")


def test_conditions_of_independent_types_compare_equal_whichever_was_written_first() -> None:
    wait_first = [_workload(WAIT), _workload(WAIT, RESERVED, ADMITTED), _workload(STARTED, RESERVED, ADMITTED)]
    wait_later = [
        _workload(RESERVED, ADMITTED),
        _workload(RESERVED, ADMITTED, WAIT),
        _workload(RESERVED, ADMITTED, STARTED),
    ]
    for versions in (wait_first, wait_later):
        assert sequences.condition_transitions(versions) == {
            "PodsReady": (("False", "WaitForStart"), ("True", "Started")),
            "QuotaReserved": (("True", "QuotaReserved"),),
            "Admitted": (("True", "Admitted"),),
        }
        assert sequences.milestone_order(versions, sequences.WORKLOAD_MILESTONES) == (
            ("QuotaReserved", "True"),
            ("Admitted", "True"),
            ("PodsReady", "True"),
        )


def test_a_milestone_out_of_upstream_order_shows() -> None:
    versions = [_workload(ADMITTED), _workload(ADMITTED, RESERVED)]
    assert sequences.milestone_order(versions, sequences.WORKLOAD_MILESTONES) == (
        ("Admitted", "True"),
        ("QuotaReserved", "True"),
    )


def test_a_condition_that_goes_back_shows_each_change() -> None:
    versions = [
        _workload(ADMITTED),
        _workload(("Admitted", "False", "UnsatisfiedAdmissionChecks")),
        _workload(ADMITTED),
    ]
    assert sequences.condition_transitions(versions)["Admitted"] == (
        ("True", "Admitted"),
        ("False", "UnsatisfiedAdmissionChecks"),
        ("True", "Admitted"),
    )


def _pod(uid: str, *, gated: bool, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingGates": [{"name": "gang"}]} if gated else {}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"uid": uid, "creationTimestamp": STAMP}, "spec": spec}


def test_a_gang_released_after_every_member_exists_whatever_the_bindings_order() -> None:
    interleaved = [
        _pod("a", gated=True),
        _pod("b", gated=True),
        _pod("a", gated=False),
        _pod("a", gated=False, node="n1"),
        _pod("b", gated=False),
    ]
    assert sequences.creation_and_release(interleaved) == (("created gated",), ("gate removed",))
    assert sequences.gate_and_binding_order(
        [_pod("a", gated=True), _pod("a", gated=False), _pod("a", gated=False, node="n")]
    ) == (
        ("created gated",),
        ("gate removed",),
        ("bound",),
    )


def test_a_member_released_before_the_next_is_created_shows() -> None:
    early = [_pod("a", gated=True), _pod("a", gated=False), _pod("b", gated=True), _pod("b", gated=False)]
    assert sequences.creation_and_release(early) == (
        ("created gated",),
        ("gate removed",),
        ("created gated",),
        ("gate removed",),
    )


SCHEDULED = (("True", ""),)
LATE = (("False", "Unschedulable"), ("True", ""))
ENTRIES = (
    explained.Known(
        "s", "gang 1 rank * PodScheduled", frozenset({LATE}), frozenset({SCHEDULED}), "timing", may_occur=True
    ),
    explained.Known("s", "workload 1 Admitted", frozenset({LATE}), frozenset({SCHEDULED}), "always"),
)


def test_listed_differences_pass_and_a_listed_one_that_always_occurs_must_occur() -> None:
    both = {"gang 1 rank 2 PodScheduled": (LATE, SCHEDULED), "workload 1 Admitted": (LATE, SCHEDULED)}
    assert explained.check("s", both, ENTRIES) == explained.Verdict({}, ())
    verdict = explained.check("s", {}, ENTRIES)
    assert (verdict.unexplained, verdict.gone) == ({}, ("workload 1 Admitted",))


def test_an_unlisted_difference_or_a_listed_one_with_other_sequences_is_unexplained() -> None:
    found = {
        "gang 1 rank 0 phases": ((("Pending",),), (("Failed",),)),
        "gang 1 rank 1 PodScheduled": (SCHEDULED, LATE),
        "workload 1 Admitted": (LATE, SCHEDULED),
    }
    verdict = explained.check("s", found, ENTRIES)
    assert sorted(verdict.unexplained) == ["gang 1 rank 0 phases", "gang 1 rank 1 PodScheduled"]
    assert explained.check("other scenario", {"workload 1 Admitted": (LATE, SCHEDULED)}, ENTRIES).unexplained


def test_every_listed_difference_names_a_scenario_of_the_test_and_gives_a_reason() -> None:
    from tests.real.test_differential import SCENARIOS

    names = {scenario.name for scenario in SCENARIOS}
    for entry in explained.KNOWN_DIFFERENCES:
        assert entry.scenario in names and entry.reason


def test_a_pod_group_reduces_to_its_scheduling_outcomes() -> None:
    unschedulable = ("PodGroupInitiallyScheduled", "False", "Unschedulable")
    scheduled = ("PodGroupInitiallyScheduled", "True", "Scheduled")
    versions = [_workload(), _workload(unschedulable), _workload(unschedulable), _workload(scheduled)]
    reduced = sequences.reduce({"scheduling.k8s.io/v1beta1/podgroups": versions}, since=0)
    assert reduced == {
        "podgroup 1 PodGroupInitiallyScheduled": (("False", "Unschedulable"), ("True", "Scheduled")),
        "podgroup 1 order": (("PodGroupInitiallyScheduled", "False"), ("PodGroupInitiallyScheduled", "True")),
    }

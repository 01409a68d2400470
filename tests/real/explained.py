"""The differences between gang-sim and the real control plane that are understood, and the check
that keeps that list the truth.

A :class:`Known` entry names a scenario and a sequence (a :func:`fnmatch.fnmatchcase` pattern, so
``gang 1 rank * PodScheduled`` covers whichever member the difference falls on), the sequences
each side may show, and why the difference does not matter to the provider. :func:`check` fails a
scenario on a difference no entry explains (a sequence outside the entry's sets is unexplained
too) and on an entry that always occurs but did not; an entry marked ``may_occur`` is a
timing-dependent difference - the real stack races one way or the other from run to run - and its
absence is not a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tests.real.sequences import Sequence

UNSCHEDULABLE_FIRST = (("False", "Unschedulable"), ("True", ""))
SCHEDULED_AT_ONCE = (("True", ""),)
FINISHED = (("True", "Succeeded"),)


@dataclass(frozen=True)
class Known:
    """A difference that is understood: what each side may show, and why it does not matter."""

    scenario: str
    sequence: str
    """A :func:`fnmatch.fnmatchcase` pattern over sequence names."""
    sim: frozenset[Sequence]
    real: frozenset[Sequence]
    reason: str
    may_occur: bool = False
    """The difference depends on timing on one side; on a run where it does not occur the sides agree."""


def _member_scheduled_late(scenario: str) -> Known:
    return Known(
        scenario,
        "gang 1 rank * PodScheduled",
        frozenset({UNSCHEDULABLE_FIRST, SCHEDULED_AT_ONCE}),
        frozenset({UNSCHEDULABLE_FIRST, SCHEDULED_AT_ONCE}),
        "a member created before the node the autoscaler adds for it has registered is marked "
        "Unschedulable until the node is there. gang-sim creates a pool's nodes its "
        "provisioningDelaySeconds (5 s) after Provisioned=True, the real harness's kwok provider at "
        "once but registered a moment later, so which member (if any) sees no node yet depends on "
        "timing on both. The provider reads only the request's and the Workload's conditions.",
        may_occur=True,
    )


def _finished_after_delete(scenario: str) -> Known:
    return Known(
        scenario,
        "workload 1 Finished",
        frozenset({FINISHED}),
        frozenset({()}),
        "the provider deletes the gang once every member succeeded; gang-sim's Job controller and Kueue "
        "mark the Job Complete and the Workload Finished in the same instant, the real ones sometimes "
        "only after the provider's delete (then the Workload is garbage-collected unfinished). Either "
        "way the quota is released and the provider never reads Finished.",
        may_occur=True,
    )


def _pods_ready_after_members_succeed(scenario: str) -> tuple[Known, Known]:
    started = (("False", "WaitForStart"), ("True", "Started"))
    milestones = (("QuotaReserved", "True"), ("Admitted", "True"))
    return (
        Known(
            scenario,
            "workload 1 PodsReady",
            frozenset({started}),
            frozenset({(*started, ("False", "WaitForRecovery")), started[:1]}),
            "real Kueue's job reconciler writes PodsReady from the Job's ready and succeeded counts when "
            "it runs (pkg/controller/jobframework/reconciler.go, generatePodsReadyCondition): if it runs "
            "between the members' success and the Job controller's Complete, PodsReady=True turns "
            "False/WaitForRecovery; if it has not run since the members started when the provider deletes "
            "the gang (every member succeeded after 5 s; seen under load), the Workload is collected "
            "still False/WaitForStart. gang-sim's Job controller and Kueue act in the instant a member's "
            "state changes. The provider reads the members, not PodsReady.",
            may_occur=True,
        ),
        Known(
            scenario,
            "workload 1 order",
            frozenset({(*milestones, ("PodsReady", "True"))}),
            frozenset({milestones}),
            "the same race: the Workload collected before real Kueue wrote PodsReady=True; the milestones "
            "it reached are in upstream's order.",
            may_occur=True,
        ),
    )


KUEUE_SCENARIOS = (
    "kueue quota admission",
    "kueue partial admission",
    "kueue admission check with a provisioning request",
)
KNOWN_DIFFERENCES: tuple[Known, ...] = (
    _member_scheduled_late("provisioning request, best-effort-atomic, granted"),
    _member_scheduled_late("kueue admission check with a provisioning request"),
    *(_finished_after_delete(scenario) for scenario in KUEUE_SCENARIOS),
    *(entry for scenario in KUEUE_SCENARIOS for entry in _pods_ready_after_members_succeed(scenario)),
)
"""The same rows, with the fixes that removed the others, are the table in docs/fidelity.md, section
"Controllers"."""


@dataclass(frozen=True)
class Verdict:
    unexplained: dict[str, tuple[Sequence, Sequence]]
    """Differences no entry explains, by sequence name: ``(on gang-sim, on the real stack)``."""
    gone: tuple[str, ...]
    """Patterns of entries that always occur but matched no difference."""


def check(
    scenario: str, found: Mapping[str, tuple[Sequence, Sequence]], known: tuple[Known, ...] = KNOWN_DIFFERENCES
) -> Verdict:
    """The differences ``found`` in ``scenario`` (by sequence name, both sides) against ``known``."""
    entries = [entry for entry in known if entry.scenario == scenario]
    explained: set[str] = set()
    used: set[int] = set()
    for name, (sim, real) in found.items():
        for index, entry in enumerate(entries):
            if fnmatchcase(name, entry.sequence) and sim in entry.sim and real in entry.real:
                explained.add(name)
                used.add(index)
                break
    unexplained = {name: sides for name, sides in found.items() if name not in explained}
    gone = tuple(entry.sequence for index, entry in enumerate(entries) if index not in used and not entry.may_occur)
    return Verdict(unexplained, gone)

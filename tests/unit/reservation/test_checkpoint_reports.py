"""Checkpoint reports: what a member's termination message says, which report of a gang is the
latest, and the GPU-time split of a failed try at its checkpoint."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.reservation import checkpoint
from airflow_provider_gang.reservation.checkpoint import CheckpointReport
from tests.builders import member

MESSAGES = [
    ("step-only", '{"checkpoint_step": 20}', (20, 20)),
    ("with-progress", '{"checkpoint_step": 20, "step": 23}', (20, 23)),
    ("padded-to-a-fixed-width", '{"checkpoint_step": 20, "step": 23}' + " " * 28, (20, 23)),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in MESSAGES], ids=[c[0] for c in MESSAGES])
def test_a_termination_message_gives_the_step(text: str, expected: tuple[int, int]) -> None:
    assert checkpoint.parse_message(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "not JSON"),
        ('{"step": 3}', '"checkpoint_step"'),
        ('{"checkpoint_step": "20"}', "whole number"),
        ('{"checkpoint_step": -1}', "whole number"),
        ('{"checkpoint_step": true}', "whole number"),
        ('{"checkpoint_step": 5, "step": 2}', "before checkpoint_step"),
        ("[20]", '"checkpoint_step"'),
    ],
)
def test_a_malformed_message_says_what_is_wrong(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        checkpoint.parse_message(text)


def test_a_pod_reports_its_last_message_and_a_malformed_one_is_ignored_with_a_warning_naming_the_pod() -> None:
    good = member(0).failed().obj()
    good["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = '{"checkpoint_step": 10}'
    assert checkpoint.report_of_pod(good, 0) == (CheckpointReport(10, 10, "gang-t1-abc-0", 0), None)
    bad = member(1).failed().obj()
    bad["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = '{"checkpoint_step": "ten"}'
    report, warning = checkpoint.report_of_pod(bad, 1)
    assert report is None
    assert warning is not None and "pod gang-t1-abc-1" in warning and "ignored" in warning
    assert checkpoint.report_of_pod(member(2).running().obj(), 2) == (None, None)


def test_the_latest_report_is_the_most_advanced_checkpoint() -> None:
    early, late = CheckpointReport(10, 12, "p0", 0), CheckpointReport(20, 20, "p1", 1)
    assert checkpoint.latest([None, early, late, None]) == late
    assert checkpoint.latest([None]) is None
    assert checkpoint.resume_step([10, None, 20, None]) == 20
    assert checkpoint.resume_step([None, None]) is None


def test_a_preempted_try_splits_its_gpu_time_at_its_checkpoint() -> None:
    assert checkpoint.split_work(100.0, start_step=0, report=CheckpointReport(15, 20)) == checkpoint.WorkSplit(
        lost=25.0, saved=75.0
    )
    assert checkpoint.split_work(100.0, start_step=10, report=CheckpointReport(15, 20)).saved == 50.0
    assert checkpoint.split_work(100.0, start_step=0, report=None) == checkpoint.WorkSplit(lost=100.0)
    assert checkpoint.split_work(100.0, start_step=15, report=CheckpointReport(15, 20)).lost == 100.0


def test_a_report_round_trips_through_the_try_record_and_a_bare_one_reads_as_its_step() -> None:
    report = CheckpointReport(20, 23, "gang-t1-abc-1", 1)
    assert report.to_dict() == {"step": 20, "progress": 23, "pod": "gang-t1-abc-1", "rank": 1}
    assert CheckpointReport.from_dict(report.to_dict()) == report
    assert CheckpointReport.from_dict({"step": 7}) == CheckpointReport(7, 7, "", None)


def _with_statuses(*statuses: dict[str, Any]) -> dict[str, Any]:
    running: dict[str, Any] = member(0).running().obj()
    running["spec"]["containers"].append({"name": "sidecar", "image": "s:1"})
    running["status"]["containerStatuses"] = list(statuses)
    return running


def _terminated(message: str = "") -> dict[str, Any]:
    return {"terminated": {"exitCode": 1, **({"message": message} if message else {})}}


def test_a_restarted_container_reports_the_message_of_its_last_termination() -> None:
    restarted = _with_statuses(
        {"name": "worker", "state": {"running": {}}, "lastState": _terminated('{"checkpoint_step": 5, "step": 6}')}
    )
    assert checkpoint.report_of_pod(restarted, 0) == (CheckpointReport(5, 6, "gang-t1-abc-0", 0), None)
    both = _with_statuses(
        {
            "name": "worker",
            "state": _terminated('{"checkpoint_step": 9}'),
            "lastState": _terminated('{"checkpoint_step": 5}'),
        }
    )
    assert checkpoint.report_of_pod(both, 0)[0] == CheckpointReport(9, 9, "gang-t1-abc-0", 0)


def test_only_container_zero_reports_and_a_termination_without_a_message_reports_nothing() -> None:
    sidecar_first = _with_statuses(
        {"name": "sidecar", "state": _terminated('{"checkpoint_step": 99}')},
        {"name": "worker", "state": _terminated('{"checkpoint_step": 10}')},
    )
    assert checkpoint.report_of_pod(sidecar_first, 0)[0] == CheckpointReport(10, 10, "gang-t1-abc-0", 0)
    silent = _with_statuses(
        {"name": "sidecar", "state": _terminated('{"checkpoint_step": 99}')},
        {"name": "worker", "state": _terminated(), "lastState": {}},
    )
    assert checkpoint.report_of_pod(silent, 0) == (None, None)

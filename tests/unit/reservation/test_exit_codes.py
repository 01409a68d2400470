"""The exit-code policy: which member's code decides, and how bad policies are refused."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import exit_codes
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.phases import Reason, is_retryable
from tests.builders import gang_spec

FAIL_ON = frozenset({2, 3})
RETRY_ON = frozenset({137, 143})


def failed(rank: int, code: int | None) -> MemberStatus:
    return MemberStatus(rank=rank, state=MemberState.FAILED, exit_code=code, reason="Error")


def running(rank: int) -> MemberStatus:
    return MemberStatus(rank=rank, state=MemberState.RUNNING)


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        pytest.param(
            [failed(0, 2), running(1)],
            (Reason.MEMBER_EXIT_FAILS_FOR_GOOD, 0, 2, "fail_on_exit_codes"),
            id="fail-on-code-fails-for-good",
        ),
        pytest.param(
            [running(0), failed(1, 137)],
            (Reason.MEMBER_EXIT_RETRYABLE, 1, 137, "retry_on_exit_codes"),
            id="retry-on-code-retries",
        ),
        pytest.param(
            [failed(0, 137), failed(1, 3)],
            (Reason.MEMBER_EXIT_FAILS_FOR_GOOD, 1, 3, "fail_on_exit_codes"),
            id="fail-on-outranks-retry-on",
        ),
        pytest.param(
            [failed(2, 143), failed(1, 137)],
            (Reason.MEMBER_EXIT_RETRYABLE, 1, 137, "retry_on_exit_codes"),
            id="lowest-rank-decides",
        ),
        pytest.param(
            [failed(0, 1), failed(1, 137)],
            (Reason.MEMBER_EXIT_RETRYABLE, 1, 137, "retry_on_exit_codes"),
            id="unlisted-code-beside-a-listed-one",
        ),
        pytest.param([failed(0, 1)], None, id="unlisted-code-keeps-member-failed"),
        pytest.param([failed(0, None)], None, id="no-exit-code-no-verdict"),
        pytest.param(
            [MemberStatus(rank=0, state=MemberState.LOST, exit_code=2, reason="Evicted")],
            None,
            id="lost-member-is-no-input",
        ),
    ],
)
def test_judge(members: list[MemberStatus], expected: tuple[Reason, int, int, str] | None) -> None:
    verdict = exit_codes.judge(members, retry_on=RETRY_ON, fail_on=FAIL_ON)
    assert (None if verdict is None else (verdict.reason, verdict.rank, verdict.exit_code, verdict.rule)) == expected


def test_verdict_reasons_say_whether_a_retry_can_help() -> None:
    assert not is_retryable(Reason.MEMBER_EXIT_FAILS_FOR_GOOD)
    assert is_retryable(Reason.MEMBER_EXIT_RETRYABLE)


def test_verdict_record_form() -> None:
    verdict = exit_codes.judge([failed(3, 2)], retry_on=frozenset(), fail_on=FAIL_ON)
    assert verdict is not None
    assert verdict.to_dict() == {
        "rank": 3,
        "exit_code": 2,
        "rule": "fail_on_exit_codes",
        "reason": "member_exit_fails_for_good",
    }
    assert "rank 3 exited with 2" in verdict.describe()


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        pytest.param({"retry_on_exit_codes": "137"}, "retry_on_exit_codes", "list of exit codes", id="string"),
        pytest.param({"fail_on_exit_codes": 2}, "fail_on_exit_codes", "list of exit codes", id="lone-int"),
        pytest.param({"fail_on_exit_codes": {2: "x"}}, "fail_on_exit_codes", "list of exit codes", id="mapping"),
        pytest.param({"fail_on_exit_codes": [True]}, "fail_on_exit_codes", "not an exit code", id="bool"),
        pytest.param({"fail_on_exit_codes": ["2"]}, "fail_on_exit_codes", "not an exit code", id="string-item"),
        pytest.param({"retry_on_exit_codes": [0]}, "retry_on_exit_codes", "0 is success", id="zero"),
        pytest.param({"retry_on_exit_codes": [256]}, "retry_on_exit_codes", "1..255", id="too-large"),
        pytest.param({"retry_on_exit_codes": [-1]}, "retry_on_exit_codes", "1..255", id="negative"),
        pytest.param(
            {"retry_on_exit_codes": [137, 2], "fail_on_exit_codes": [2]},
            "fail_on_exit_codes",
            "[2] are also in retry_on_exit_codes",
            id="overlap",
        ),
    ],
)
def test_bad_policies_are_refused(values: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(GangSpecError) as caught:
        gang_spec(**values)
    assert caught.value.field == field and words in caught.value.message


def test_policy_round_trips_through_the_stored_spec() -> None:
    spec = gang_spec(retry_on_exit_codes=(143, 137), fail_on_exit_codes={2})
    assert spec.retry_on_exit_codes == RETRY_ON and spec.fail_on_exit_codes == frozenset({2})
    assert spec.to_dict()["retry_on_exit_codes"] == [137, 143]
    assert type(spec).from_dict(spec.to_dict()) == spec


def test_no_policy_written_means_no_code_decides() -> None:
    spec = gang_spec(retry_on_exit_codes=None, fail_on_exit_codes=None)
    assert (spec.retry_on_exit_codes, spec.fail_on_exit_codes) == (frozenset(), frozenset())
    assert (spec.to_dict()["retry_on_exit_codes"], spec.to_dict()["fail_on_exit_codes"]) == ([], [])
    assert (
        exit_codes.judge([failed(0, 137)], retry_on=spec.retry_on_exit_codes, fail_on=spec.fail_on_exit_codes) is None
    )

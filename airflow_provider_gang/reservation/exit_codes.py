"""The exit-code policy: what a failed member's exit code says about the try it ended.

Two sets of codes, both optional, name the program's own conventions:

- ``fail_on_exit_codes``: "my own bug or bad input" (a config error, a failed assertion). A try
  ended by such a code is ``member_exit_fails_for_good``: not retryable, so the task fails
  without another try and the ladder is not walked.
- ``retry_on_exit_codes``: "the infrastructure failed me" (an NCCL timeout, a lost device, a
  watchdog). Such a try is ``member_exit_retryable``: retryable, answered by ``RetryAsIs``
  (whose default is every retryable reason) or by any step listing it in ``applies_to``.

A failed member whose code is in neither set leaves the try ``member_failed``, as without a
policy: retryable and answered by ``RetryAsIs``. This follows XPK's ``--restart-on-exit-codes``
(codes that allow a restart, ``src/xpk/parser/workload.py``, rendered as a Job
``podFailurePolicy``) and SkyPilot's ``job_recovery.recover_on_exit_codes`` (codes, 0-255, that
always trigger recovery, ``sky/utils/schemas.py``); unlike XPK, a code outside both sets keeps
today's retryable default instead of failing the job, so adding a policy never removes a retry
that happened before.

:func:`judge` decides from the members of the snapshot that ended the run (the first one with a
failed member, ``reservation.running``), rank order, first match wins: any failed member with a
``fail_on`` code -> fails for good (a bad program fails on every node, so it outranks a flaky
one); else any with a ``retry_on`` code -> retryable; else no verdict. Members lost from outside
(evicted, node gone) and members without an exit code (an image that cannot be pulled) are no
input: their pods did not exit by themselves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.phases import Reason

FAIL_RULE = "fail_on_exit_codes"
RETRY_RULE = "retry_on_exit_codes"
HIGHEST_EXIT_CODE = 255
"""A process's exit status is 8 bits (``exit(3)``; a signal shows as 128 + its number)."""


def as_code_set(value: Any, argument: str) -> frozenset[int]:
    """``value`` (an iterable of ints 1..255, or ``None``) as a frozenset; :class:`GangSpecError`
    with field ``argument`` names what is wrong and the fix."""
    example = f"{argument}=[137, 143]"
    if value is None:
        return frozenset()
    if isinstance(value, (str, bytes, bool, dict)) or not isinstance(value, Iterable):
        raise GangSpecError(argument, f"must be a list of exit codes, got {value!r}; write e.g. {example}")
    codes = list(value)
    for code in codes:
        if isinstance(code, bool) or not isinstance(code, int):
            raise GangSpecError(argument, f"{code!r} is not an exit code (a whole number); write e.g. {example}")
        if code == 0:
            raise GangSpecError(argument, "0 is success: a member that exits 0 never fails the try; remove it")
        if not 1 <= code <= HIGHEST_EXIT_CODE:
            raise GangSpecError(
                argument,
                f"{code} is not an exit code: exit statuses are 1..{HIGHEST_EXIT_CODE} "
                f"(a signal N shows as 128 + N, e.g. 137 for SIGKILL)",
            )
    return frozenset(codes)


def check_policy(retry_on: frozenset[int], fail_on: frozenset[int]) -> None:
    """:class:`GangSpecError` when a code is in both sets: it cannot both retry and fail for good."""
    both = sorted(retry_on & fail_on)
    if both:
        raise GangSpecError(
            FAIL_RULE,
            f"exit code(s) {both} are also in retry_on_exit_codes; a code either "
            "retries or fails for good: remove them from one of the two lists",
        )


@dataclass(frozen=True)
class ExitCodeVerdict:
    """Which member's exit code decided the try, and by which rule (``FAIL_RULE`` or ``RETRY_RULE``)."""

    reason: Reason
    rank: int
    exit_code: int
    rule: str

    def to_dict(self) -> dict[str, Any]:
        """Plain values for the try record: ``{"rank", "exit_code", "rule", "reason"}``."""
        return {"rank": self.rank, "exit_code": self.exit_code, "rule": self.rule, "reason": self.reason.value}

    def describe(self) -> str:
        ending = "no retry can help" if self.rule == FAIL_RULE else "a new try may succeed"
        return f"rank {self.rank} exited with {self.exit_code}, listed in {self.rule}: {ending}"


def judge(
    members: Iterable[MemberStatus], *, retry_on: frozenset[int], fail_on: frozenset[int]
) -> ExitCodeVerdict | None:
    """The verdict of the policy on ``members`` (module docstring), or ``None`` when it says nothing."""
    failed = sorted(
        (member for member in members if member.state is MemberState.FAILED and member.exit_code is not None),
        key=lambda member: member.rank,
    )
    for codes, reason, rule in (
        (fail_on, Reason.MEMBER_EXIT_FAILS_FOR_GOOD, FAIL_RULE),
        (retry_on, Reason.MEMBER_EXIT_RETRYABLE, RETRY_RULE),
    ):
        for member in failed:
            if member.exit_code in codes:
                return ExitCodeVerdict(reason, member.rank, int(member.exit_code), rule)
    return None

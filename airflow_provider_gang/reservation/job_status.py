"""Where a gang stands by its Job's status alone: :func:`decide_by_job`. Pure.

For a gang on a MultiKueue worker the provider has no connection to (``reservation.multikueue``),
the member pods cannot be read; what it can read is the manager's Job, whose ``status`` MultiKueue
overwrites with the worker Job's own (``localJob.Status = remoteJob.Status``, Kueue v0.17.0
``pkg/controller/jobs/job/job_multikueue_adapter.go``). The fields are the Job controller's
(``batch/v1`` ``JobStatus``, https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/):
``ready`` (members running and ready), ``succeeded``, ``failed``, and the conditions ``Complete``,
``Failed`` and its forerunner ``FailureTarget``.

Precedence, first match wins::

    no Job                                   -> RESERVATION_GONE  (deleted from outside)
    Failed=True or FailureTarget=True,
      or status.failed > 0                   -> MEMBER_FAILED     (backoffLimit 0: one member failed)
    Complete=True or succeeded >= size       -> ALL_SUCCEEDED
    ready + succeeded >= size                -> MEMBERS_RUNNING
    otherwise                                -> MEMBERS_STARTING

No member detail exists at this distance: decisions carry no members, so a try followed this way
records no exit codes and no GPU time used (its reserved time is still counted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.reservation import conditions
from airflow_provider_gang.reservation.conditions import Object
from airflow_provider_gang.reservation.outcome import Decision
from airflow_provider_gang.reservation.phases import Phase, Reason

COMPLETE = "Complete"
FAILURE_TARGET = "FailureTarget"
MIRRORED = "as the manager's mirror of the worker's Job status says"


def _count(status: Mapping[str, Any], field: str) -> int:
    value = status.get(field)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _failure(job: Object) -> str | None:
    """``reason: message`` of the condition that failed the Job, or ``None``."""
    for condition_type in (conditions.FAILED, FAILURE_TARGET):
        if conditions.is_condition_true(job, condition_type):
            return conditions.condition_message(job, condition_type) or condition_type
    failed = _count(job.get("status") or {}, "failed")
    return f"{failed} member pod(s) failed" if failed else None


def decide_by_job(job: Object | None, *, size: int) -> Decision:
    """The run-stage decision for a gang of ``size`` members whose Job (``None``: gone) is all there is
    to read, by the precedence in the module docstring."""
    if job is None:
        return Decision(Phase.FAILED, True, Reason.RESERVATION_GONE, "the Job is gone from the manager")
    status = job.get("status") or {}
    failure = _failure(job)
    if failure is not None:
        return Decision(Phase.FAILED, True, Reason.MEMBER_FAILED, f"the Job failed ({failure}), {MIRRORED}")
    succeeded, ready = _count(status, "succeeded"), _count(status, "ready")
    if conditions.is_condition_true(job, COMPLETE) or succeeded >= size:
        return Decision(Phase.SUCCEEDED, True, Reason.ALL_SUCCEEDED, f"all {size} members succeeded, {MIRRORED}")
    if ready + succeeded >= size:
        return Decision(Phase.RUNNING, False, Reason.MEMBERS_RUNNING, f"all {size} members running or done, {MIRRORED}")
    return Decision(
        Phase.STARTING,
        False,
        Reason.MEMBERS_STARTING,
        f"{ready + succeeded} of {size} members running or done, {MIRRORED}",
    )

"""Waiting is never silent: what a gang trigger logs while it waits, between its first and last line.

Airflow 3 forwards a trigger's log records to the task log of the task instance it waits for (the
triggerer binds a per-trigger logger, ``airflow/jobs/triggerer_job_runner.py``), so these lines are
what a person reading the task log sees while the task is deferred.

:class:`WaitReporter` is fed every decision the trigger makes and logs:

- a line whenever what the gang waits on changes: the decision's message (for a Workload waiting for
  quota, Kueue's pending reason: ``waiting for quota: ExceedsMaxQuota - <message>``), any condition of
  the ProvisioningRequest or Kueue Workload (type, status, reason, message) or the state of one of the
  Workload's admission checks - with that text;
- a heartbeat line when nothing was logged for ``heartbeat_seconds`` (trigger kwarg, default 300),
  e.g. ``still waiting 42 min: ProvisioningRequest ... accepted, waiting for capacity; try 2 of 3,
  step 'other zone'``.

It reports only while the gang waits: in the reservation stage, and in the run stage while members
are starting (``Phase.STARTING``); a gang that runs is watched silently until it ends.

Trigger arguments it reads (``reservation.records.triggers.TriggerArguments``): ``heartbeat_seconds``;
``tries_allowed`` (``M`` of "try N of M", ``None``: unknown, left out) and ``step_description`` (the
fallback step the try runs, ``None``: left out).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.reservation import reserving
from airflow_provider_gang.reservation.conditions import admission_checks, conditions_of
from airflow_provider_gang.reservation.decision import Decision
from airflow_provider_gang.reservation.observed import Observed, Stage
from airflow_provider_gang.reservation.phases import Phase


def describe_elapsed(seconds: float) -> str:
    """``"12 s"``, ``"42 min"``, ``"2 h 5 min"``: how long a wait has lasted, for a person."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def describe_conditions(kind: str, obj: Mapping[str, Any] | None) -> str:
    """``"ProvisioningRequest Accepted=True, Provisioned=False (Pending: waiting for nodes)"``, or
    ``""`` for an absent object or one without conditions."""
    if obj is None:
        return ""
    parts = []
    for condition in conditions_of(obj):
        text = f"{condition.get('type')}={condition.get('status')}"
        detail = ": ".join(str(item) for item in (condition.get("reason"), condition.get("message")) if item)
        parts.append(f"{text} ({detail})" if detail else text)
    return f"{kind} {', '.join(parts)}" if parts else ""


def describe_admission_checks(workload: Mapping[str, Any] | None) -> str:
    """``"admission checks prov=Retry (Retrying after failure: ...)"``, or ``""`` without checks.

    Kueue's check states outrank its ``Admitted`` condition (``reservation.workload``), so they are
    shown beside it."""
    parts = []
    for check in admission_checks(workload):
        text = f"{check.get('name')}={check.get('state')}"
        parts.append(f"{text} ({check.get('message')})" if check.get("message") else text)
    return "admission checks " + ", ".join(parts) if parts else ""


def describe_workload(workload: Mapping[str, Any]) -> str:
    """A Workload as the Gang page shows it: where it stands as a trigger decides it (``"Workload x
    waiting for quota: ExceedsMaxQuota - <message>"``), then its conditions and admission checks."""
    described = (
        reserving.from_workload(workload, 0).message,
        describe_conditions("Workload", workload),
        describe_admission_checks(workload),
    )
    return "; ".join(text for text in described if text)


def reservation_conditions(observed: Observed) -> str:
    """Every condition of the gang's ProvisioningRequest and Workload, as :func:`describe_conditions`,
    and the Workload's admission checks (:func:`describe_admission_checks`)."""
    described = (
        describe_conditions("ProvisioningRequest", observed.provisioning_request),
        describe_conditions("Workload", observed.workload),
        describe_admission_checks(observed.workload),
    )
    return "; ".join(text for text in described if text)


def is_waiting(observed: Observed, decision: Decision) -> bool:
    """Whether the gang still waits: reservation not decided, or members not all started."""
    if decision.terminal:
        return False
    return observed.stage is Stage.RESERVATION or decision.phase is Phase.STARTING


class WaitReporter:
    """Logs condition changes and heartbeats of one trigger's wait (module docstring)."""

    def __init__(
        self,
        log: logging.Logger | Any,
        gang_name: str,
        *,
        started_at: float,
        heartbeat_seconds: float,
        try_number: int | None,
        tries_allowed: int | None,
        step_description: str | None,
    ) -> None:
        self.log, self.gang_name, self.started_at = log, gang_name, started_at
        self.heartbeat_seconds = heartbeat_seconds
        self.try_number, self.tries_allowed, self.step_description = try_number, tries_allowed, step_description
        self.last_state: tuple[str, str] | None = None
        self.last_line_at: float | None = None

    def context(self) -> str:
        """``"try 2 of 3, step 'other zone'"`` (the parts known)."""
        parts = []
        if self.try_number is not None:
            parts.append(f"try {self.try_number}" + (f" of {self.tries_allowed}" if self.tries_allowed else ""))
        if self.step_description:
            parts.append(f"step '{self.step_description}'")
        return ", ".join(parts)

    def saw(self, observed: Observed, decision: Decision, now: float) -> None:
        """Log a change of state or conditions, else a heartbeat when one is due."""
        if not is_waiting(observed, decision):
            return
        conditions = reservation_conditions(observed)
        state = (decision.message, conditions)
        elapsed = describe_elapsed(max(0.0, now - self.started_at))
        context = self.context()
        suffix = f"; {context}" if context else ""
        if state != self.last_state:
            self.last_state, self.last_line_at = state, now
            detail = f" [{conditions}]" if conditions else ""
            self.log.info(
                "Gang %s: %s after %s: %s%s%s",
                self.gang_name,
                decision.phase.value,
                elapsed,
                decision.message,
                detail,
                suffix,
            )
        elif self.last_line_at is None or now - self.last_line_at >= self.heartbeat_seconds:
            self.last_line_at = now
            self.log.info("Gang %s: still waiting %s: %s%s", self.gang_name, elapsed, decision.message, suffix)

    def tick_seconds(self) -> float:
        """How often the trigger must wake with nothing changed for heartbeats to be on time."""
        return max(0.05, self.heartbeat_seconds / 2)

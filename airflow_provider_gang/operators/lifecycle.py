"""The life of one try in the task state store: begun, updated after each stage, ended exactly once.

:class:`TryLifecycle` is the only writer of the two task-state keys (``operators.try_history``): it
stores the ``TryState`` of the try in progress and, when the try ends, appends its ``TryRecord``
(``reservation.records.tries``) and removes the state - in that order, so a crash between the two
leaves a recorded try that is never adopted (``TryHistory.record`` is idempotent per try).

:func:`classify` says why a try ended when it ended by raising; ``operators.execution`` routes every
exception of every stage through it, so no try ends unrecorded whatever raised. The only way a try
ends without a record is the worker process dying; the state it left is then examined by the next
try (adopted if its gang is intact, else recorded as killed) - see ``reservation.tries.plan``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.airflow_compat import AirflowTaskTerminated, AirflowTaskTimeout
from airflow_provider_gang.hooks.precheck import PrecheckFailed
from airflow_provider_gang.kube import errors as kube_errors
from airflow_provider_gang.operators import metrics
from airflow_provider_gang.operators.try_history import TryHistory, TryStore
from airflow_provider_gang.reservation.errors import GangSpecError, MalformedObject, PlacementRefused
from airflow_provider_gang.reservation.phases import Reason, is_retryable
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError

KILLING_EXCEPTIONS: tuple[type[BaseException], ...] = (
    AirflowTaskTimeout,
    AirflowTaskTerminated,
    KeyboardInterrupt,
    SystemExit,
)
"""Raised into a try from outside: ``execution_timeout``, SIGTERM, interpreter shutdown."""


def classify(error: BaseException) -> tuple[Reason, str]:
    """Why a try that raised ``error`` ended, and a message naming what failed.

    Precheck refusals, invalid arguments and non-retryable API answers (403, 422...) are ``invalid``;
    API errors that survived the client's retries (429, 5xx, transport) are ``cluster_unreachable``;
    a kill from outside is ``killed``; an answer that cannot be read is ``malformed_answer``; a
    topology gang that cannot be placed ends with the reason its refusal gives; anything else is
    ``unexpected_error`` (retryable, as Airflow retries a plain exception).
    """
    if isinstance(error, (PrecheckFailed, GangArgumentError, GangSpecError)):
        return Reason.INVALID, str(error)
    if isinstance(error, MalformedObject):
        return Reason.MALFORMED_ANSWER, f"the API server sent an object this provider cannot read: {error}"
    if isinstance(error, PlacementRefused):
        return error.reason, error.message
    if isinstance(error, kube_errors.KubeError):
        reason = Reason.CLUSTER_UNREACHABLE if error.retryable else Reason.INVALID
        return reason, f"Kubernetes API: {error}"
    if isinstance(error, KILLING_EXCEPTIONS):
        return Reason.KILLED, f"stopped from outside ({type(error).__name__}: {error})".replace(": )", ")")
    return Reason.UNEXPECTED_ERROR, f"{type(error).__name__}: {error}"


class TryLifecycle:
    """Read and write the try history of the task instance of ``context`` (see module docstring)."""

    def __init__(self, context: Mapping[str, Any], store: TryStore | None = None) -> None:
        self._history = TryHistory(context, store)
        self.try_number = int(context["ti"].try_number)
        self.ended = False
        """Whether this object recorded the end of its try (exceptions raised after that are the
        try's own failure, already recorded)."""

    def finished(self) -> list[TryRecord]:
        """Every finished try of the task instance, oldest first."""
        return self._history.finished()

    def in_progress(self) -> TryState | None:
        """The stored state of the try in progress (this one resuming, or an earlier one whose worker
        stopped), or ``None``. A try already recorded as finished is never in progress."""
        state = self._history.current()
        if state is None:
            return None
        if any(record.attempt == state.plan.attempt for record in self._history.finished()):
            return None
        return state

    def begin(self, plan: TryPlan) -> TryState:
        """Store the state of a try that starts (or adopts a gang) with ``plan``."""
        state = TryState(plan=plan)
        self._history.store_current(state)
        return state

    def update(self, state: TryState, **changes: Any) -> TryState:
        """Store ``state`` with ``changes`` applied, and return it."""
        changed = state.with_changes(**changes)
        self._history.store_current(changed)
        return changed

    def end(self, record: TryRecord) -> list[TryRecord]:
        """Record the try as finished (the state goes with it); every finished try, this one last.
        The try's metrics (``operators.metrics``) are sent when its record is first written."""
        current = self._history.current()
        in_progress = None if current is None else current.plan.attempt
        first_record = not any(item.attempt == record.attempt for item in self._history.finished())
        self._history.record(record, drop_current=in_progress in (None, record.attempt))
        if first_record:
            metrics.emit_try(record, succeeded=record.outcome == Reason.ALL_SUCCEEDED.value)
        self.ended = record.attempt == self.try_number or self.ended
        return self._history.finished()

    def end_without_gang(
        self, *, attempt: int, reason: Reason, message: str, mode: str, size: int, plan: TryPlan | None = None
    ) -> list[TryRecord]:
        """Record a try that ended before it had a gang on the cluster (refused, invalid) or whose gang
        was gone when it was examined (``plan`` given: that try's plan)."""
        record = TryRecord(
            attempt=attempt,
            gang=plan.gang if plan else "",
            step=plan.step if plan else "none",
            step_index=plan.step_index if plan else None,
            mode=mode,
            size=size,
            outcome=reason.value,
            message=message,
            retryable=is_retryable(reason),
            ladder=plan.ladder if plan else None,
            adopted_from=plan.adopted_from if plan else None,
            kubernetes_conn_id=plan.kubernetes_conn_id if plan else None,
            namespace=plan.spec.namespace if plan else None,
            repeated=plan.repeats if plan else False,
            requested_at=plan.requested_at if plan else None,
            start_deadline=plan.start_deadline if plan else None,
            zone=plan.spec.zone if plan else None,
            queue=plan.spec.queue if plan else None,
            provisioning_class=plan.spec.provisioning_class if plan else None,
        )
        return self.end(record)

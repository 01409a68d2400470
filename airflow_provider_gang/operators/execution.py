"""How one try of a ``GangTrainingOperator`` runs, from ``execute`` to the last trigger event.

::

    execute ──────────► operators.starting.start   plan, precheck, withdraw, reserve, wait
    execute_reserved ─► operators.launching.reserved   launch the members together, wait
    execute_finished ─► operators.launching.finished   logs, accounting, teardown, record

Every entry point runs inside :func:`guarded`: whatever it raises, the try is ended once - its
objects torn down (best effort), its record written with a typed reason (``lifecycle.classify``),
and a typed Airflow exception raised (``failures``) - except ``TaskDeferred``, which is a wait, not
an end. A try is killed when ``on_kill`` ran (blocking mode) or Airflow raised into it
(``execution_timeout``): it is recorded as ``killed`` and ends with ``AirflowTaskTerminated``.

The stages take a frozen ``settings.TrySettings`` (the operator's arguments as values) and a
``waiting.Waiter``; they never read or write operator attributes. Every entry point reads the try's
state from the task state store (``lifecycle``), because ``dag.test()`` drops ``defer()`` kwargs and
a real triggerer keeps them. Events arrive as plain values and are read here, once, as
``reservation.records.events.GangEvent``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from airflow_provider_gang.airflow_compat import TaskDeferred
from airflow_provider_gang.operators import launching, starting
from airflow_provider_gang.operators.lifecycle import KILLING_EXCEPTIONS, classify
from airflow_provider_gang.operators.settings import TrySettings
from airflow_provider_gang.operators.try_run import KILLED, TryRun
from airflow_provider_gang.operators.waiting import Waiter
from airflow_provider_gang.reservation.records.events import GangEvent

T = TypeVar("T")


def start_try(settings: TrySettings, waiter: Waiter, context: Mapping[str, Any]) -> Any:
    """``execute``: plan the try, create (or adopt) its reservation, wait for it."""
    run = TryRun(settings, waiter, context)
    return guarded(run, lambda: starting.start(run))


def on_reservation_event(settings: TrySettings, waiter: Waiter, context: Mapping[str, Any], event: Any) -> Any:
    """``execute_reserved``: launch the members together, or end the try with the event's reason."""
    run = TryRun(settings, waiter, context)
    return guarded(run, lambda: launching.reserved(run, GangEvent.from_dict(event)))


def on_run_event(settings: TrySettings, waiter: Waiter, context: Mapping[str, Any], event: Any) -> Any:
    """``execute_finished``: logs, accounting, clean-up; the summary on success."""
    run = TryRun(settings, waiter, context)
    return guarded(run, lambda: launching.finished(run, GangEvent.from_dict(event)))


def guarded(run: TryRun, stage: Callable[[], T]) -> T:
    """Run ``stage``; if it raises anything but a deferral, end the try once (module docstring)."""
    try:
        return stage()
    except TaskDeferred:
        raise
    except BaseException as error:
        if run.lifecycle.ended:
            raise  # the try's own ending, already recorded
        reason, message = classify(error)
        if run.waiter.killed:
            reason, message = KILLED.reason, KILLED.message
        ending = run.end_with(reason, message)
        if isinstance(error, KILLING_EXCEPTIONS):
            raise
        raise ending from error

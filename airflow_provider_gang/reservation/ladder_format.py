"""The stored form of a fallback ladder: plain JSON values kept with every try.

A try record stores the ladder its ``step_index`` points into (``reservation.tries.plan``), so a DAG
edited between retries cannot change what a stored index means. This module is that format: the step
class names (:data:`STEP_TYPES`, never renamed) and each step's dataclass fields, ``applies_to`` as
sorted reason values and tuples as lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_gang.reservation import fallback
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.fallback import FallbackStep
from airflow_provider_gang.reservation.phases import Reason

STEP_TYPES: dict[str, type[FallbackStep]] = {
    step.__name__: step
    for step in (
        fallback.RetryAsIs,
        fallback.ShrinkTo,
        fallback.OtherZone,
        fallback.OtherProvisioningClass,
        fallback.OtherQueue,
        fallback.OnDemand,
        fallback.UseReservation,
        fallback.LeaveReservation,
        fallback.OtherCluster,
        fallback.LoosenTopology,
    )
}
"""Step classes by the name a stored ladder uses for them (a stored format: never rename)."""


def ladder_to_plain(ladder: Sequence[FallbackStep]) -> list[dict[str, Any]]:
    """The ladder as JSON values, stored beside every step index so that a DAG edited between
    retries cannot change what a stored index means: ``[{"step": <class name>, <field>: value}]``."""
    plain = []
    for step in ladder:
        values: dict[str, Any] = {"step": type(step).__name__}
        for item in dataclasses.fields(step):
            value = getattr(step, item.name)
            if item.name == "applies_to":
                value = sorted(Reason(reason).value for reason in value)
            elif isinstance(value, tuple):
                value = [list(pair) for pair in value]
            values[item.name] = value
        plain.append(values)
    return plain


def ladder_from_plain(plain: Sequence[Mapping[str, Any]]) -> tuple[FallbackStep, ...]:
    """Inverse of :func:`ladder_to_plain`; :class:`GangSpecError` (field ``fallbacks``) names a step
    this version does not know."""
    ladder = []
    for index, values in enumerate(plain):
        kind = STEP_TYPES.get(str(values.get("step")))
        if kind is None:
            raise GangSpecError("fallbacks", f"stored step {index + 1} has unknown type {values.get('step')!r}")
        arguments: dict[str, Any] = {}
        for item in dataclasses.fields(kind):
            if item.name not in values:
                continue
            value = values[item.name]
            if item.name == "applies_to":
                value = frozenset(Reason(reason) for reason in value)
            elif isinstance(value, list):
                value = tuple(tuple(pair) for pair in value)
            arguments[item.name] = value
        ladder.append(kind(**arguments))
    return tuple(ladder)

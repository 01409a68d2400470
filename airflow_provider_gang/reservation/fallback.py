"""The fallback ladder: typed steps a retry walks down, and how they shape the next try's spec.

A ladder is an ordered tuple of steps. Try 1 runs the gang as configured; every later try takes a
step chosen from the try history by :mod:`.ladder_choice` (the first unused step that applies to the
reason the previous try failed for; a transient failure no step answers repeats the step). A step
is used up after :attr:`FallbackStep.uses` tries: one for every step but ``RetryAsIs(times=n)``, so
``(RetryAsIs(times=3), OnDemand())`` answers spot preemptions by staying on spot three times, then
leaving it. Steps are **cumulative**: try *n* runs the base spec with every step used so far applied
in the order they were used, so moving on to another zone after a shrink keeps the smaller size -
except that ``OtherCluster`` starts over from the configured spec (:attr:`FallbackStep.starts_over`):
zones, classes and queues of the earlier cluster mean nothing on the new one.

Default reasons per step (override with ``applies_to``):

=========================  =================================================================
``RetryAsIs``               any retryable reason (booking expired, revoked, member failed...)
``ShrinkTo``                capacity refused, deadline, provisioning failed, Kueue retry/reject
``OtherZone``               capacity refused, deadline, provisioning failed, revoked, booking expired
``OtherProvisioningClass``  capacity refused, deadline, provisioning failed, revoked
``OtherQueue``              deadline, Kueue retry/reject, preempted, evicted, deactivated
``OnDemand``                revoked, preempted, spot preempted, evicted, member lost, capacity
                            refused, deadline
``UseReservation``          capacity refused, deadline, provisioning failed, revoked, preempted
``LeaveReservation``        capacity refused, deadline, provisioning failed, revoked
``OtherCluster``            capacity refused, deadline, provisioning failed, revoked, Kueue
                            retry/reject, cluster unreachable
``LoosenTopology``          capacity refused, deadline, provisioning failed, Kueue
                            retry/reject, no topology domain
=========================  =================================================================

Non-retryable reasons (invalid spec, start window missed) never choose a step.

This module owns the steps and their checks; choosing among them is :mod:`.ladder_choice`'s, turning
a choice into the next try's plan :mod:`.tries.plan`'s.
"""

from __future__ import annotations

import dataclasses
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from airflow_provider_gang.reservation import naming, phases
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode

_CAPACITY = frozenset({Reason.CAPACITY_NOT_FOUND, Reason.DEADLINE, Reason.PROVISIONING_FAILED})
_QUOTA = frozenset({Reason.KUEUE_RETRY, Reason.KUEUE_REJECTED})
_RETRYABLE = frozenset(reason for reason in Reason if phases.is_retryable(reason))


@dataclass(frozen=True)
class FallbackStep(ABC):
    """Base of every step. ``applies_to`` lists the failure reasons the step answers; empty means the
    step's default (see module docstring)."""

    applies_to: frozenset[Reason] = field(default=frozenset(), kw_only=True)
    default_reasons: ClassVar[frozenset[Reason]] = _RETRYABLE
    required_mode: ClassVar[str] = ""
    """The reservation mode the step needs, or ``""`` when any mode (or several) will do."""
    starts_over: ClassVar[bool] = False
    """Whether the step applies to the configured spec instead of the previous try's (module docstring)."""

    @property
    def reasons(self) -> frozenset[Reason]:
        return frozenset(Reason(reason) for reason in self.applies_to) or self.default_reasons

    @property
    def uses(self) -> int:
        """How many tries may use this step before it is used up."""
        return 1

    @abstractmethod
    def describe(self) -> str:
        """A short human description for logs and the final failure message."""

    @abstractmethod
    def apply(self, spec: GangSpec) -> GangSpec:
        """The spec of a try that uses this step, derived from the previous try's ``spec``."""


@dataclass(frozen=True)
class RetryAsIs(FallbackStep):
    """Try again unchanged (with a new name: a new try always gets new objects), up to ``times``
    tries."""

    times: int = 1

    @property
    def uses(self) -> int:
        return self.times

    def describe(self) -> str:
        return "retry as-is" if self.times == 1 else f"retry as-is (up to {self.times} times)"

    def apply(self, spec: GangSpec) -> GangSpec:
        return spec


@dataclass(frozen=True)
class ShrinkTo(FallbackStep):
    """Run with fewer members: the largest multiple of ``divisible_by`` that is <= ``size`` (and no
    larger than the current size). Refused below the gang's ``min_size``. Members learn both sizes
    (``GANG_ORIGINAL_SIZE``, ``GANG_SIZE``) to compensate, e.g. by gradient accumulation."""

    size: int
    divisible_by: int = 1
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | _QUOTA

    def describe(self) -> str:
        multiple = f" (a multiple of {self.divisible_by})" if self.divisible_by > 1 else ""
        return f"shrink to {self.size} members{multiple}"

    def target(self, current: int) -> int:
        """The size this step shrinks a gang of ``current`` members to."""
        ceiling = min(self.size, current)
        return ceiling - ceiling % self.divisible_by

    def apply(self, spec: GangSpec) -> GangSpec:
        if not isinstance(self.size, int) or self.size < 1:
            raise GangSpecError("fallbacks", f"{self.describe()}: size must be a whole number >= 1")
        if not isinstance(self.divisible_by, int) or self.divisible_by < 1:
            raise GangSpecError("fallbacks", f"{self.describe()}: divisible_by must be a whole number >= 1")
        size = self.target(spec.size)
        if size < spec.floor:
            raise GangSpecError(
                "fallbacks", f"{self.describe()} gives {size} members, below min_size={spec.floor}; lower min_size"
            )
        minimum = None if spec.min_size is None else min(spec.min_size, size)
        return dataclasses.replace(spec, size=size, min_size=minimum, original_size=spec.size_before_shrink)


@dataclass(frozen=True)
class OtherZone(FallbackStep):
    """Place the gang in ``zone`` (strictly, by default: a required node selector)."""

    zone: str
    strict: bool = True
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {Reason.CAPACITY_REVOKED, Reason.BOOKING_EXPIRED}

    def describe(self) -> str:
        return f"other zone {self.zone}"

    def apply(self, spec: GangSpec) -> GangSpec:
        return dataclasses.replace(spec, zone=self.zone, strict_zone=self.strict)


@dataclass(frozen=True)
class OtherProvisioningClass(FallbackStep):
    """Ask with another ProvisioningRequest class (and its parameters, replacing the old ones)."""

    provisioning_class: str
    parameters: tuple[tuple[str, str], ...] = ()
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {Reason.CAPACITY_REVOKED}
    """``capacity_revoked`` too: a Dynamic Workload Scheduler run cut at ``maxRunDurationSeconds`` is
    exactly when a user moves to another class."""

    def describe(self) -> str:
        return f"other provisioning class {self.provisioning_class}"

    def apply(self, spec: GangSpec) -> GangSpec:
        if not spec.mode.uses_provisioning_request:
            needs = "needs a ProvisioningRequest mode"
            raise GangSpecError("fallbacks", f"{self.describe()} {needs}, not {spec.mode.value!r}")
        return dataclasses.replace(
            spec, provisioning_class=self.provisioning_class, provisioning_parameters=dict(self.parameters)
        )


@dataclass(frozen=True)
class OtherQueue(FallbackStep):
    """Submit to another Kueue LocalQueue (quota fallback)."""

    queue: str
    required_mode: ClassVar[str] = ReservationMode.KUEUE.value
    default_reasons: ClassVar[frozenset[Reason]] = _QUOTA | {
        Reason.DEADLINE,
        Reason.PREEMPTED,
        Reason.EVICTED,
        Reason.WORKLOAD_DEACTIVATED,
    }

    def describe(self) -> str:
        return f"other queue {self.queue}"

    def apply(self, spec: GangSpec) -> GangSpec:
        if spec.mode is not ReservationMode.KUEUE:
            raise GangSpecError("fallbacks", f"{self.describe()} needs reservation='kueue', not {spec.mode.value!r}")
        return dataclasses.replace(spec, queue=self.queue)


@dataclass(frozen=True)
class OnDemand(FallbackStep):
    """Leave spot capacity for on-demand."""

    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {
        Reason.CAPACITY_REVOKED,
        Reason.PREEMPTED,
        Reason.SPOT_PREEMPTED,
        Reason.EVICTED,
        Reason.MEMBER_LOST,
    }

    def describe(self) -> str:
        return "spot to on-demand"

    def apply(self, spec: GangSpec) -> GangSpec:
        return dataclasses.replace(spec, spot=False)


@dataclass(frozen=True)
class UseReservation(FallbackStep):
    """Consume the GKE specific reservation ``name`` (on-demand capacity bought ahead): members
    require nodes labelled ``cloud.google.com/reservation-name=<name>``. Reservations serve
    on-demand VMs only, so the step also leaves spot. As the first rung, write the operator's
    ``use_reservation=`` instead."""

    name: str
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {Reason.CAPACITY_REVOKED, Reason.PREEMPTED}
    """``preempted`` too: capacity bought ahead is the answer to spot or quota being taken away."""

    def describe(self) -> str:
        return f"use reservation {self.name}"

    def apply(self, spec: GangSpec) -> GangSpec:
        return dataclasses.replace(spec, reservation_name=self.name, spot=False)


@dataclass(frozen=True)
class LeaveReservation(FallbackStep):
    """Stop requiring a reservation: run on ordinary on-demand capacity, or on spot with
    ``spot=True`` (the reservation is full, or its nodes were taken back)."""

    spot: bool = False
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | {Reason.CAPACITY_REVOKED}

    def describe(self) -> str:
        return "leave the reservation for spot" if self.spot else "leave the reservation for on-demand"

    def apply(self, spec: GangSpec) -> GangSpec:
        return dataclasses.replace(spec, reservation_name=None, spot=self.spot)


@dataclass(frozen=True)
class LoosenTopology(FallbackStep):
    """Loosen the gang's topology for the next try: require one domain of the wider label ``to``
    (``LoosenTopology(BLOCK)`` after a rack: rack -> block), prefer it with ``preferred=True``, or, with
    ``to=None``, drop the requirement (``preferred=True``: keep the current label as a preference).
    Refused at parse time for a gang without a topology. Its defaults are the reasons a gang no domain
    holds ends with: the deadline (Kueue and the Workload API keep such a gang pending), capacity
    refused or not provisioned in the domain asked (gates, provisioning_request), Kueue's retry or
    rejection, and ``no_topology_domain``; not ``topology_domain_full`` (another scheduler won the race
    for the domain: the next try chooses anew without loosening)."""

    to: str | None = None
    preferred: bool = False
    default_reasons: ClassVar[frozenset[Reason]] = _CAPACITY | _QUOTA | {Reason.NO_TOPOLOGY_DOMAIN}

    def describe(self) -> str:
        if self.to is not None:
            return f"loosen the topology to {'prefer' if self.preferred else 'require'} {self.to}"
        return "prefer the topology instead of requiring it" if self.preferred else "drop the topology"

    def apply(self, spec: GangSpec) -> GangSpec:
        current = spec.topology_label
        if current is None:
            raise GangSpecError(
                "fallbacks", f"{self.describe()}: the gang has no topology to loosen; set required_topology"
            )
        label = self.to or current
        if self.to is None and not self.preferred:
            return dataclasses.replace(spec, required_topology=None, preferred_topology=None)
        if self.preferred:
            return dataclasses.replace(spec, required_topology=None, preferred_topology=label)
        return dataclasses.replace(spec, required_topology=label, preferred_topology=None)


CONNECTION_ID = re.compile(r"[\w#!()\-.:/\\]{1,250}")
"""An Airflow connection id: the characters and length Airflow accepts (``RE_SANITIZE_CONN_ID`` and
``ID_LEN`` in apache/airflow ``airflow-core/src/airflow/models/connection.py``)."""


@dataclass(frozen=True)
class OtherCluster(FallbackStep):
    """Move the gang to the cluster of the Airflow ``kubernetes`` connection ``kubernetes_conn_id``,
    in ``namespace`` (``None``: the operator's namespace).

    The try prechecks and reserves there with the spec **as configured**: steps used before this one
    answered the earlier cluster and are dropped (:attr:`starts_over`); steps after it (a zone, class
    or queue of the new cluster) apply on top. The earlier cluster's objects are withdrawn through the
    earlier cluster's own connection (``operators.starting``); the try history stays in the task's
    state store, and every try record names its connection. Whole clusters stocked out or down are
    what it is for: its defaults are the capacity reasons and ``cluster_unreachable`` (SkyPilot fails
    over across regions and clouds the same way; Kueue's MultiKueue has no ordered cluster choice yet,
    kubernetes-sigs/kueue#9270, #3757). Whether the connection exists is known only on a worker: the
    try that takes the step refuses to start (``invalid``, naming the step) when it does not."""

    kubernetes_conn_id: str
    namespace: str | None = None
    starts_over: ClassVar[bool] = True
    default_reasons: ClassVar[frozenset[Reason]] = (
        _CAPACITY | _QUOTA | {Reason.CAPACITY_REVOKED, Reason.CLUSTER_UNREACHABLE}
    )

    def describe(self) -> str:
        where = "" if self.namespace is None else f" (namespace {self.namespace})"
        return f"other cluster {self.kubernetes_conn_id}{where}"

    def apply(self, spec: GangSpec) -> GangSpec:
        if not isinstance(self.kubernetes_conn_id, str) or not CONNECTION_ID.fullmatch(self.kubernetes_conn_id):
            raise GangSpecError(
                "fallbacks",
                f"OtherCluster kubernetes_conn_id must be an Airflow connection id (letters, digits, "
                f"_-.:/#!() up to 250), got {self.kubernetes_conn_id!r}",
            )
        if self.namespace is None:
            return spec
        if not isinstance(self.namespace, str) or not naming.is_dns_label(self.namespace):
            raise GangSpecError(
                "fallbacks", f"{self.describe()}: namespace must be a DNS-1123 label, got {self.namespace!r}"
            )
        return dataclasses.replace(spec, namespace=self.namespace)


def cluster_of(ladder: Sequence[FallbackStep], step_indexes: Iterable[int | None]) -> OtherCluster | None:
    """The ``OtherCluster`` step last used among ``step_indexes`` (where the try runs), or ``None``:
    the operator's own connection."""
    found: OtherCluster | None = None
    for index in step_indexes:
        step = None if index is None else ladder[index]
        if isinstance(step, OtherCluster):
            found = step
    return found


def spec_for_steps(base: GangSpec, ladder: Sequence[FallbackStep], step_indexes: Iterable[int | None]) -> GangSpec:
    """``base`` with the ladder steps at ``step_indexes`` applied in that order (``None`` skipped)."""
    spec = base
    for index in step_indexes:
        if index is not None:
            step = ladder[index]
            spec = step.apply(base if step.starts_over else spec)
    return spec


def check_ladder(ladder: Sequence[FallbackStep], base: GangSpec) -> None:
    """Raise :class:`GangSpecError` (field ``fallbacks``) if a step cannot apply to ``base``, alone
    or after the steps before it; run at DAG parse time so a bad ladder never reaches a retry."""
    spec = base
    for index, step in enumerate(ladder):
        if not isinstance(step, FallbackStep):
            raise GangSpecError("fallbacks", f"step {index + 1} is {step!r}, not a reservation.fallback step")
        if isinstance(step.applies_to, str) or not isinstance(step.applies_to, (set, frozenset, list, tuple)):
            raise GangSpecError(
                "fallbacks",
                f"step {index + 1} ({step.describe()}): applies_to must be a set of "
                f"reasons, got {step.applies_to!r}; write e.g. applies_to={{{step.applies_to!r}}}",
            )
        unknown = [reason for reason in step.applies_to if reason not in set(Reason)]
        if unknown:
            raise GangSpecError("fallbacks", f"step {index + 1}: unknown reasons {unknown}")
        if not isinstance(step.uses, int) or isinstance(step.uses, bool) or step.uses < 1:
            raise GangSpecError(
                "fallbacks",
                f"step {index + 1} ({type(step).__name__}): times must be a whole "
                f"number >= 1, got {step.uses!r}; write e.g. RetryAsIs(times=3)",
            )
        try:
            step.apply(base)
            spec = step.apply(base if step.starts_over else spec)
        except GangSpecError as error:
            raise GangSpecError("fallbacks", f"step {index + 1} ({step.describe()}): {error}") from None


def no_op_steps(ladder: Sequence[FallbackStep], base: GangSpec) -> list[str]:
    """Descriptions of the steps that change nothing when applied right after the steps before them
    (``ShrinkTo(16)`` on a gang of 4): worth a warning, not an error."""
    found, spec = [], base
    for index, step in enumerate(ladder):
        after = step.apply(base if step.starts_over else spec)
        unchanged = after.size == spec.size if isinstance(step, ShrinkTo) else after == spec
        if unchanged and not isinstance(step, (RetryAsIs, OtherCluster)):
            found.append(f"step {index + 1} ({step.describe()})")
        spec = after
    return found


def required_modes(ladder: Sequence[FallbackStep]) -> tuple[tuple[str, str], ...]:
    """``(description, required mode or "")`` per step, for checking the ladder against the mode."""
    return tuple((step.describe(), step.required_mode) for step in ladder)


def tries_needed(ladder: Sequence[FallbackStep]) -> int:
    """The retries that walk the whole ladder: every step's :attr:`~FallbackStep.uses`, summed."""
    return sum(step.uses for step in ladder)

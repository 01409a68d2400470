"""The timeline of a task's tries: one lane per try, laid out for an SVG, as pure data.

Each lane starts when its try requested its reservation (``TryPlan.requested_at``); the lanes share
one axis of seconds since that moment, because a try record keeps how long each stage lasted but
not when it began (``reservation.records.tries.TryRecord``; ``reservation.tries.results`` measures
the stages on the provider's clock). The stages of a lane:

- ``waiting``: reservation requested -> granted (``queue_seconds``; ProvisioningRequest or Kueue);
- ``provisioning``: members launched -> all running (``provisioning_seconds``);
- ``running``: all running -> the run's end (``run_seconds``).

Tearing down is not recorded with a duration (the record is written as the teardown starts), so a
lane ends with an end mark coloured by the outcome instead. The try in progress
(``gang.current``) gets an open lane up to ``now``, and the ``start_by`` limit of its plan
(``start_deadline``) is drawn across the lanes. Geometry is in SVG user units; the template
(``templates/task.html.j2``) only places it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_provider_gang.plugin import units
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState

WIDTH = 1000
LABEL_WIDTH = 300
LANE_HEIGHT = 50
BAR_HEIGHT = 18
AXIS_HEIGHT = 28
MINIMUM_SEGMENT = 3.0
"""Narrowest drawn segment: a 6 ms run still shows."""
SUCCEEDED_OUTCOMES = frozenset({"all_succeeded", "reserved"})


@dataclass(frozen=True)
class Segment:
    """One stage of a lane: ``stage`` (``waiting``, ``provisioning``, ``running``), its x and width,
    and the tooltip text (``"running 1 h 02 min"``)."""

    stage: str
    x: float
    width: float
    title: str


@dataclass(frozen=True)
class Lane:
    """One try: ``tone`` (``succeeded``, ``failed``, ``active``) colours it; ``heading`` and
    ``detail`` are its two label lines; ``end_x`` is where its end mark goes (``None``: open)."""

    attempt: int
    tone: str
    heading: str
    detail: str
    outcome: str
    y: float
    segments: tuple[Segment, ...]
    end_x: float | None
    place: str = ""
    """Drawn under the bar: mode and zone / queue / class where known."""


@dataclass(frozen=True)
class Tick:
    x: float
    text: str


@dataclass(frozen=True)
class Limit:
    """A vertical line across the lanes: the ``start_by`` limit of the try in progress."""

    x: float
    text: str


@dataclass(frozen=True)
class Timeline:
    width: int
    height: float
    label_width: int
    bar_height: int
    lanes: tuple[Lane, ...]
    ticks: tuple[Tick, ...]
    limit: Limit | None


def tone_of(outcome: str) -> str:
    return "succeeded" if outcome in SUCCEEDED_OUTCOMES else "failed"


def place_of(zone: str | None, queue: str | None, provisioning_class: str | None) -> str:
    """``"zone us-central1-b · queue team-a"``; ``"any zone"`` when nothing pins the gang."""
    parts = [f"zone {zone}" if zone else "any zone"]
    if queue:
        parts.append(f"queue {queue}")
    if provisioning_class:
        parts.append(f"class {provisioning_class}")
    return " · ".join(parts)


@dataclass(frozen=True)
class _Raw:
    attempt: int
    tone: str
    heading: str
    detail: str
    outcome: str
    stages: tuple[tuple[str, float], ...]
    closed: bool
    place: str


def _finished(record: TryRecord, place: str | None) -> _Raw:
    stages = tuple(
        (stage, seconds)
        for stage, seconds in (
            ("waiting", record.queue_seconds),
            ("provisioning", record.provisioning_seconds),
            ("running", record.run_seconds),
        )
        if seconds is not None
    )
    mode = record.mode.replace("_", " ")
    return _Raw(
        attempt=record.attempt,
        tone=tone_of(record.outcome),
        heading=f"try {record.attempt} · {units.reason(record.outcome)}",
        detail=f"{record.step} · {units.members(record.size)}",
        outcome=record.outcome,
        stages=stages,
        closed=True,
        place=mode if place is None else f"{mode} · {place}",
    )


UNRECORDED = "ended unrecorded"
"""Outcome of a try left in ``gang.current`` of a finished task: Airflow ended the task instance
(marked failed, a worker that died) before the try recorded how it ended."""


def _in_progress(current: TryState, now: float, *, task_finished: bool = False) -> _Raw:
    plan, spec = current.plan, current.plan.spec
    if task_finished:
        known = (current.launched_at or plan.requested_at) - plan.requested_at
        stages: tuple[tuple[str, float], ...] = (("waiting", known),) if known > 0 else ()
        return _Raw(
            attempt=plan.attempt,
            tone="failed",
            heading=f"try {plan.attempt} · {UNRECORDED}",
            detail=f"{plan.step} · {units.members(current.size_run or spec.size)}",
            place=f"{spec.mode.value.replace('_', ' ')} · {place_of(spec.zone, spec.queue, spec.provisioning_class)}",
            outcome=UNRECORDED,
            stages=stages,
            closed=True,
        )
    if current.launched_at is None:
        stages = (("waiting", now - plan.requested_at),)
        heading = "waiting for its reservation"
    else:
        stages = (("waiting", current.launched_at - plan.requested_at), ("running", now - current.launched_at))
        heading = "members launched"
    place = place_of(spec.zone, spec.queue, spec.provisioning_class)
    return _Raw(
        attempt=plan.attempt,
        tone="active",
        heading=f"try {plan.attempt} · {heading}",
        detail=f"{plan.step} · {units.members(current.size_run or spec.size)}",
        place=f"{spec.mode.value.replace('_', ' ')} · {place}",
        outcome="in progress",
        stages=tuple((stage, max(0.0, seconds)) for stage, seconds in stages),
        closed=False,
    )


def _tick_step(span: float) -> float:
    for step in (0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 43200, 86400):
        if span / step <= 6:
            return float(step)
    return 86400.0 * max(1, round(span / 86400 / 6))


def build_timeline(
    records: list[TryRecord],
    current: TryState | None,
    *,
    now: float,
    places: dict[int, str] | None = None,
    task_finished: bool = False,
    other_tries: Sequence[int] = (),
) -> Timeline | None:
    """The lanes of ``records`` (finished tries, in order) and of ``current`` when it has no record
    yet (with ``task_finished``, a try Airflow ended before it recorded its end: :data:`UNRECORDED`,
    only its known wait drawn); ``places`` gives a finished try's zone / queue / class line where it
    is known (the summary of a successful try has it). ``other_tries``: Airflow's try numbers, of
    which those with neither a record nor ``current`` get an empty :data:`UNRECORDED` lane (the next
    try overwrote what they had stored). ``None`` without any try."""
    places = places or {}
    raw = [_finished(record, places.get(record.attempt)) for record in records]
    recorded = {record.attempt for record in records}
    limit_seconds = None
    if current is not None and current.plan.attempt not in recorded:
        raw.append(_in_progress(current, now, task_finished=task_finished))
        if current.plan.start_deadline is not None and not task_finished:
            limit_seconds = current.plan.start_deadline - current.plan.requested_at
    drawn = recorded | ({current.plan.attempt} if current is not None else set())
    for attempt in sorted(set(other_tries) - drawn):
        raw.append(
            _Raw(attempt, "failed", f"try {attempt} · {UNRECORDED}", "no gang record left", UNRECORDED, (), True, "")
        )
    raw.sort(key=lambda lane: lane.attempt)
    if not raw:
        return None
    longest = max([sum(seconds for _, seconds in lane.stages) for lane in raw] + [limit_seconds or 0.0, 1e-3])
    span = longest * 1.08
    plot = WIDTH - LABEL_WIDTH - 16

    def x_of(seconds: float) -> float:
        return LABEL_WIDTH + plot * max(0.0, seconds) / span

    lanes = []
    for index, lane in enumerate(raw):
        y = AXIS_HEIGHT + index * LANE_HEIGHT
        position, segments = 0.0, []
        for stage, seconds in lane.stages:
            start = x_of(position)
            width = max(MINIMUM_SEGMENT, x_of(position + seconds) - start)
            segments.append(Segment(stage, round(start, 1), round(width, 1), f"{stage} {units.duration(seconds)}"))
            position += seconds
        end_x = (segments[-1].x + segments[-1].width) if segments else x_of(0)
        lanes.append(
            Lane(
                attempt=lane.attempt,
                tone=lane.tone,
                heading=lane.heading,
                detail=lane.detail,
                outcome=lane.outcome,
                y=y,
                segments=tuple(segments),
                end_x=round(end_x, 1) if lane.closed else None,
                place=lane.place,
            )
        )
    step = _tick_step(span)
    ticks = tuple(
        Tick(round(x_of(step * count), 1), units.duration(step * count)) for count in range(int(span / step) + 1)
    )
    limit = None
    if limit_seconds is not None:
        limit = Limit(round(x_of(limit_seconds), 1), f"start_by limit ({units.duration(max(0.0, limit_seconds))})")
    return Timeline(
        width=WIDTH,
        height=AXIS_HEIGHT + len(lanes) * LANE_HEIGHT + (22 if limit is not None else 6),
        label_width=LABEL_WIDTH,
        bar_height=BAR_HEIGHT,
        lanes=tuple(lanes),
        ticks=ticks,
        limit=limit,
    )

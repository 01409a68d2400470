"""The timeline of a task's tries: one lane per try, laid out for an SVG, as pure data.

Each lane starts when its try requested its reservation (``TryPlan.requested_at``, kept in the try
record as ``requested_at``); the lanes share one axis of seconds since that moment. A try record
keeps how long each stage lasted, and when its teardown began and ended
(``reservation.records.tries.TryRecord``; ``reservation.tries.results`` measures them on the
provider's clock). The stages of a lane:

- ``waiting``: reservation requested -> granted (``queue_seconds``; ProvisioningRequest or Kueue).
  A try never granted waited until its teardown began, when the record says when that was;
- ``provisioning``: members launched -> all running (``provisioning_seconds``);
- ``running``: all running -> the run's end (``run_seconds``);
- ``teardown``: deleting the gang (``teardown_started_at`` -> ``teardown_ended_at``), drawn where it
  began when the record says so, else right after the last stage. A gap before it is time no stage
  accounts for: Airflow resuming the deferred task on a worker after its trigger fired, reading the
  members' logs.

A finished lane ends with an end mark coloured by the outcome; the try in progress
(``gang.current``) gets an open lane up to ``now`` (tearing down since ``teardown_started_at`` once it
began). Each lane shows its mode and zone / queue / class, and its plan's ``start_by`` limit
(``start_deadline``) as a mark on the lane. :data:`LEGEND` names what each colour and mark means.
Records written before these were kept draw as before: no teardown, no limit, the place from the
summary (``places``). Geometry is in SVG user units; the template (``templates/page.html.j2``)
only places it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from airflow_provider_gang.plugin import wording
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState

WIDTH = 1000
LABEL_WIDTH = 300
LANE_HEIGHT = 50
BAR_HEIGHT = 18
AXIS_HEIGHT = 28
MINIMUM_SEGMENT = 3.0
"""Narrowest drawn segment: a 6 ms run still shows."""
SUCCEEDED_OUTCOMES = frozenset({"all_succeeded", "reserved"})
STAGE_NAMES = {
    "waiting": "waiting",
    "provisioning": "provisioning",
    "running": "running",
    "teardown": "tearing down",
}
"""Each stage's name in a segment's tooltip."""


@dataclass(frozen=True)
class Segment:
    """One stage of a lane: ``stage`` (a key of :data:`STAGE_NAMES`), its x and width, and the
    tooltip text (``"running 1 h 02 min"``)."""

    stage: str
    x: float
    width: float
    title: str


@dataclass(frozen=True)
class Limit:
    """The ``start_by`` limit of a lane's try: where its mark goes and what it says."""

    x: float
    text: str


@dataclass(frozen=True)
class Lane:
    """One try: ``tone`` (``succeeded``, ``failed``, ``active``) colours it; ``heading`` and
    ``detail`` are its two label lines; ``end_x`` is where its end mark goes (``None``: open);
    ``place`` (mode and zone / queue / class where known) is drawn under the bar; ``limit`` is its
    plan's ``start_by`` limit (``None``: none, or not recorded)."""

    attempt: int
    tone: str
    heading: str
    detail: str
    outcome: str
    y: float
    segments: tuple[Segment, ...]
    end_x: float | None
    place: str = ""
    limit: Limit | None = None


@dataclass(frozen=True)
class Tick:
    x: float
    text: str


@dataclass(frozen=True)
class LegendItem:
    """One entry of the legend: ``mark`` names how it is drawn (``stage-<stage>``, ``tone-<tone>``,
    ``end`` or ``limit``; the template's styles), ``text`` what it means."""

    mark: str
    text: str


LEGEND = (
    LegendItem("stage-waiting", "waiting for the reservation"),
    LegendItem("stage-provisioning", "provisioning (members starting)"),
    LegendItem("stage-running", "running"),
    LegendItem("stage-teardown", "tearing down (deleting the gang)"),
    LegendItem("end", "end of the try"),
    LegendItem("limit", "start_by limit"),
    LegendItem("tone-succeeded", "succeeded"),
    LegendItem("tone-failed", "failed"),
    LegendItem("tone-active", "in progress"),
)
"""What the timeline's colours and marks mean: stages by shade, the outcome by colour."""


@dataclass(frozen=True)
class Timeline:
    width: int
    height: float
    label_width: int
    bar_height: int
    lanes: tuple[Lane, ...]
    ticks: tuple[Tick, ...]
    legend: tuple[LegendItem, ...] = LEGEND


def tone_of(outcome: str) -> str:
    return "succeeded" if outcome in SUCCEEDED_OUTCOMES else "failed"


@dataclass(frozen=True)
class _Raw:
    """A lane before layout: ``stages`` are (stage, start, seconds), in seconds since the request
    (``start`` ``None``: right after the previous stage); ``limit`` likewise."""

    attempt: int
    tone: str
    heading: str
    detail: str
    outcome: str
    stages: tuple[tuple[str, float | None, float], ...]
    closed: bool
    place: str
    limit: float | None = None


def _since(moment: float | None, origin: float | None) -> float | None:
    return None if moment is None or origin is None else max(0.0, moment - origin)


def _finished(record: TryRecord, summary_place: str | None) -> _Raw:
    stages: list[tuple[str, float | None, float]] = [
        (stage, None, seconds)
        for stage, seconds in (
            ("waiting", record.queue_seconds),
            ("provisioning", record.provisioning_seconds),
            ("running", record.run_seconds),
        )
        if seconds is not None
    ]
    teardown_at = _since(record.teardown_started_at, record.requested_at)
    if not stages and teardown_at is not None:
        stages.append(("waiting", None, teardown_at))  # never granted: it waited until the teardown
    if record.teardown_started_at is not None and record.teardown_ended_at is not None:
        stages.append(("teardown", teardown_at, max(0.0, record.teardown_ended_at - record.teardown_started_at)))
    mode = record.mode.replace("_", " ")
    if record.requested_at is not None:  # written with its place (zone / queue / class)
        summary_place = wording.place_of(record.zone, record.queue, record.provisioning_class, record.worker_cluster)
    return _Raw(
        attempt=record.attempt,
        tone=tone_of(record.outcome),
        heading=f"try {record.attempt} · {wording.reason(record.outcome)}",
        detail=f"{record.step} · {wording.members(record.size)}",
        outcome=record.outcome,
        stages=tuple(stages),
        closed=True,
        place=mode if summary_place is None else f"{mode} · {summary_place}",
        limit=_since(record.start_deadline, record.requested_at),
    )


UNRECORDED = "ended unrecorded"
"""Outcome of a try left in ``gang.current`` of a finished task: Airflow ended the task instance
(marked failed, a worker that died) before the try recorded how it ended."""


def _in_progress(current: TryState, now: float, *, task_finished: bool = False) -> _Raw:
    plan, spec = current.plan, current.plan.spec
    where = wording.place_of(spec.zone, spec.queue, spec.provisioning_class, wording.worker_of(current))
    place = f"{spec.mode.value.replace('_', ' ')} · {where}"
    detail = f"{plan.step} · {wording.members(current.size_run or spec.size)}"
    limit = _since(plan.start_deadline, plan.requested_at)
    if task_finished:
        known = (current.launched_at or plan.requested_at) - plan.requested_at
        return _Raw(
            attempt=plan.attempt,
            tone="failed",
            heading=f"try {plan.attempt} · {UNRECORDED}",
            detail=detail,
            place=place,
            outcome=UNRECORDED,
            stages=(("waiting", None, known),) if known > 0 else (),
            closed=True,
            limit=limit,
        )
    if current.launched_at is None:
        stages: list[tuple[str, float | None, float]] = [("waiting", None, now - plan.requested_at)]
        heading = "waiting for its reservation"
    else:
        launched = current.launched_at - plan.requested_at
        until = now if current.teardown_started_at is None else current.teardown_started_at
        stages = [("waiting", None, launched), ("running", None, until - current.launched_at)]
        heading = "members launched"
    if current.teardown_started_at is not None:
        if current.launched_at is None:
            stages = [("waiting", None, current.teardown_started_at - plan.requested_at)]
        stages.append(("teardown", current.teardown_started_at - plan.requested_at, now - current.teardown_started_at))
        heading = "tearing down"
    return _Raw(
        attempt=plan.attempt,
        tone="active",
        heading=f"try {plan.attempt} · {heading}",
        detail=detail,
        place=place,
        outcome="in progress",
        stages=tuple((stage, start, max(0.0, seconds)) for stage, start, seconds in stages),
        closed=False,
        limit=limit,
    )


def _tick_step(span: float) -> float:
    for step in (0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 43200, 86400):
        if span / step <= 6:
            return float(step)
    return 86400.0 * max(1, round(span / 86400 / 6))


def _extent(lane: _Raw) -> float:
    """Where a lane's last stage ends, in seconds since its request."""
    position = 0.0
    for _, start, seconds in lane.stages:
        position = max(position, start if start is not None else position) + seconds
    return position


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
    only its known wait drawn); ``places`` gives a finished try's zone / queue / class line where its
    record does not (the summary of a successful try has it). ``other_tries``: Airflow's try numbers,
    of which those with neither a record nor ``current`` get an empty :data:`UNRECORDED` lane (the
    next try overwrote what they had stored). ``None`` without any try."""
    raw = _raw_lanes(
        records, current, now=now, places=places or {}, task_finished=task_finished, other_tries=other_tries
    )
    if not raw:
        return None
    axis = _Axis.spanning(raw)
    lanes = tuple(_lay_out(lane, AXIS_HEIGHT + index * LANE_HEIGHT, axis) for index, lane in enumerate(raw))
    return Timeline(
        width=WIDTH,
        height=AXIS_HEIGHT + len(lanes) * LANE_HEIGHT + 6,
        label_width=LABEL_WIDTH,
        bar_height=BAR_HEIGHT,
        lanes=lanes,
        ticks=axis.ticks(),
    )


def _raw_lanes(
    records: list[TryRecord],
    current: TryState | None,
    *,
    now: float,
    places: dict[int, str],
    task_finished: bool,
    other_tries: Sequence[int],
) -> list[_Raw]:
    """Every try's lane before layout, by attempt (:func:`build_timeline`'s contract)."""
    raw = [_finished(record, places.get(record.attempt)) for record in records]
    recorded = {record.attempt for record in records}
    if current is not None and current.plan.attempt not in recorded:
        raw.append(_in_progress(current, now, task_finished=task_finished))
    drawn = recorded | ({current.plan.attempt} if current is not None else set())
    for attempt in sorted(set(other_tries) - drawn):
        raw.append(
            _Raw(attempt, "failed", f"try {attempt} · {UNRECORDED}", "no gang record left", UNRECORDED, (), True, "")
        )
    return sorted(raw, key=lambda lane: lane.attempt)


@dataclass(frozen=True)
class _Axis:
    """The shared time axis: ``span`` seconds since a try's request over the plot's width."""

    span: float

    @classmethod
    def spanning(cls, lanes: Sequence[_Raw]) -> _Axis:
        """An axis 8 % longer than the longest lane or ``start_by`` limit."""
        longest = max([_extent(lane) for lane in lanes] + [lane.limit or 0.0 for lane in lanes] + [1e-3])
        return cls(longest * 1.08)

    def x_of(self, seconds: float) -> float:
        return LABEL_WIDTH + (WIDTH - LABEL_WIDTH - 16) * max(0.0, seconds) / self.span

    def ticks(self) -> tuple[Tick, ...]:
        step = _tick_step(self.span)
        return tuple(
            Tick(round(self.x_of(step * count), 1), wording.duration(step * count))
            for count in range(int(self.span / step) + 1)
        )


def _lay_out(lane: _Raw, y: float, axis: _Axis) -> Lane:
    """One lane's segments, end mark and limit on ``axis``, at height ``y``."""
    position, segments = 0.0, []
    for stage, start_at, seconds in lane.stages:
        position = max(position, start_at if start_at is not None else position)
        start = axis.x_of(position)
        width = max(MINIMUM_SEGMENT, axis.x_of(position + seconds) - start)
        title = f"{STAGE_NAMES[stage]} {wording.duration(seconds)}"
        segments.append(Segment(stage, round(start, 1), round(width, 1), title))
        position += seconds
    end_x = (segments[-1].x + segments[-1].width) if segments else axis.x_of(0)
    limit = None
    if lane.limit is not None:
        limit = Limit(round(axis.x_of(lane.limit), 1), f"start_by limit ({wording.duration(lane.limit)})")
    return Lane(
        attempt=lane.attempt,
        tone=lane.tone,
        heading=lane.heading,
        detail=lane.detail,
        outcome=lane.outcome,
        y=y,
        segments=tuple(segments),
        end_x=round(end_x, 1) if lane.closed else None,
        place=lane.place,
        limit=limit,
    )

"""Triggerers that die and come back, and triggerers that run one trigger twice.

Airflow 3.3's triggerer runs each trigger in a task of its own (``TriggerRunner.run_trigger``):
``async for event in trigger.run()``; a cancellation carrying the user-action message (clear, mark
failed, mark success) first awaits ``on_kill()``, swallowing its cancellation; ``cleanup()`` is awaited
in ``finally`` on every exit. When a triggerer stops or dies its triggers' tasks are cancelled
without that message - no ``on_kill`` - and another triggerer builds each trigger again from the
classpath and kwargs stored when the task deferred (:func:`~tests.reliability.harness.rebuild`).
:func:`serve` runs a trigger the way ``run_trigger`` does.

:class:`DyingTriggerer` (a ``run_trigger`` for :func:`~tests.reliability.harness.run_task`) cancels
each stage's trigger at the :class:`Cut` points it is given, one after another, rebuilding the trigger
every time, and lets the last copy run to its event. :class:`TwinTriggerers` runs two copies of every
trigger at once (HA triggerers running one trigger twice, apache/airflow#37180).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.reliability.emulator_side import Control
from tests.reliability.harness import rebuild

USER_ACTION = "cancelled by a user action"
"""The cancel message that makes :func:`serve` call ``on_kill`` (Airflow's ``_USER_ACTION_CANCEL_MSG``)."""
ON_KILL_TIMEOUT = 30.0
"""``[triggerer] on_kill_timeout`` default."""
STAGE_TIMEOUT = 90.0
"""Longest one stage (every copy of one trigger) may take."""
CUT_TIMEOUT = 10.0
"""Longest a copy is watched for its cut point (or two copies for both watching)."""
POLL_SECONDS = 0.005
"""How often a cut point's condition is looked at: reflector counters have no notification."""
LIST_LATENCY = 0.2
"""Seconds the emulator delays every request while a copy cut mid-LIST runs: the LIST is in flight
that long, so the poll sees it in flight."""

KINDS = ("delay", "mid-list", "mid-watch", "between-events")


# -- where a copy is cut -------------------------------------------------------------------------


@dataclass(frozen=True)
class Cut:
    """Where one copy of a trigger is cancelled.

    - ``delay``: ``wait`` seconds after it started, whatever it is doing;
    - ``mid-list``: while a LIST of one of its reflectors is in flight (the emulator answers every
      request :data:`LIST_LATENCY` late until the cut);
    - ``mid-watch``: ``wait`` seconds after every reflector listed and opened its WATCH;
    - ``between-events``: once its watches delivered ``changes`` changes (resourceVersion moves seen by
      polling: at least that many), while it waits for the next.
    """

    kind: str
    wait: float = 0.0
    changes: int = 0

    def __str__(self) -> str:
        if self.kind == "between-events":
            return f"{self.kind}({self.changes})"
        return f"{self.kind}({self.wait:.3f}s)" if self.kind in ("delay", "mid-watch") else self.kind


def cut_of(kind: str, rng: random.Random) -> Cut:
    """A cut of ``kind`` with seeded parameters."""
    if kind == "delay":
        return Cut(kind, wait=round(rng.uniform(0.01, 0.3), 3))
    if kind == "mid-watch":
        return Cut(kind, wait=round(rng.uniform(0.0, 0.05), 3))
    if kind == "between-events":
        return Cut(kind, changes=rng.randint(1, 2))
    return Cut(kind)


def plan_cuts(rng: random.Random, first: str, *, most: int = 3) -> list[Cut]:
    """``first`` then up to ``most - 1`` more cuts of seeded kinds, for one stage."""
    kinds = [first, *(rng.choice(KINDS) for _ in range(rng.randint(0, most - 1)))]
    return [cut_of(kind, rng) for kind in kinds]


def is_listing(trigger: Any) -> bool:
    """The trigger built its reflectors and one of them has not listed yet."""
    return bool(trigger.reflectors) and any(reflector.stats.lists == 0 for reflector in trigger.reflectors)


def is_watching(trigger: Any) -> bool:
    """Every reflector of the trigger listed and opened a WATCH."""
    return bool(trigger.reflectors) and all(reflector.stats.watches >= 1 for reflector in trigger.reflectors)


class Changes:
    """Changes the watches of one trigger copy delivered since it listed (resourceVersion moves, polled)."""

    def __init__(self, trigger: Any) -> None:
        self.trigger = trigger
        self.versions: dict[int, str] = {}
        self.count = 0

    def __call__(self) -> int:
        for reflector in self.trigger.reflectors:
            if reflector.stats.lists == 0:
                continue
            seen = self.versions.setdefault(id(reflector), reflector.resource_version)
            if seen != reflector.resource_version:
                self.versions[id(reflector)] = reflector.resource_version
                self.count += 1
        return self.count


async def until(condition: Callable[[], bool], *tasks: asyncio.Task[Any], timeout: float = CUT_TIMEOUT) -> bool:
    """``True`` as soon as ``condition()`` holds while every task runs; ``False`` once one has ended,
    or after ``timeout`` seconds.

    The caller acts on ``True`` before awaiting anything, so the condition still holds then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not any(task.done() for task in tasks) and loop.time() < deadline:
        if condition():
            return True
        await asyncio.wait(tasks, timeout=POLL_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    return False


async def still_running(task: asyncio.Task[Any], seconds: float) -> bool:
    """Wait ``seconds`` (the fault itself: a seeded delay); whether ``task`` is still running then."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    return not done


async def reach(cut: Cut, trigger: Any, task: asyncio.Task[Any]) -> bool:
    """Wait for ``cut``'s point in the copy ``trigger`` served by ``task``; ``False`` if it fired first."""
    if cut.kind == "delay":
        return await still_running(task, cut.wait)
    if cut.kind == "mid-list":
        return await until(lambda: is_listing(trigger), task)
    if cut.kind == "mid-watch":
        return await until(lambda: is_watching(trigger), task) and await still_running(task, cut.wait)
    if cut.kind == "between-events":
        changes = Changes(trigger)
        return await until(lambda: changes() >= cut.changes, task)
    raise ValueError(f"unknown cut {cut.kind!r}")


# -- serving a trigger ---------------------------------------------------------------------------


async def serve(trigger: Any) -> dict[str, Any]:
    """Run ``trigger`` as Airflow 3.3's ``TriggerRunner.run_trigger`` does; its first event's payload.

    Unlike Airflow, an exception of ``cleanup()`` is not swallowed: it fails the test."""
    try:
        async with contextlib.aclosing(trigger.run()) as events:
            async for event in events:
                return dict(event.payload)
        raise AssertionError(f"{type(trigger).__name__} ended without an event")
    except asyncio.CancelledError as cancel:
        if cancel.args and cancel.args[0] == USER_ACTION:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(trigger.on_kill(), ON_KILL_TIMEOUT)
        raise
    finally:
        await trigger.cleanup()


def tasks_left(baseline: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """Tasks of this loop still running that were not running at ``baseline``."""
    return [task for task in asyncio.all_tasks() - baseline if not task.done()]


async def die() -> None:
    """The triggerer process ends: every other task on its loop is cancelled at once (what is in
    flight in them - a detached ``on_kill`` deletion included - goes with it)."""
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    await settle()


async def settle() -> None:
    """Let the loop close what the ended tasks left closing: a TLS transport closes over the next
    loop iterations (aiohttp "Graceful Shutdown": https://docs.aiohttp.org/en/stable/client_advanced.html),
    and ``asyncio.run`` would otherwise end the loop first and leave it to the garbage collector."""
    await asyncio.sleep(0.25)


async def background_done(timeout: float = 30.0) -> None:
    """The triggerer lives on: wait for the work it still runs (a detached ``on_kill`` deletion), then settle."""
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    if others:
        await asyncio.wait(others, timeout=timeout)
    await settle()


# -- runners for run_task --------------------------------------------------------------------------


@dataclass
class StageLog:
    """What happened to one stage's trigger: the cuts reached (in order) and the event(s) it ended with."""

    copies: int = 0
    cuts: list[Cut] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


class DyingTriggerer:
    """A ``run_trigger`` that cancels each stage's trigger at ``plan[stage]`` (``"reservation"``,
    ``"run"``), rebuilding it from the deferred trigger every time, then runs the last copy to its event.

    A planned cut the trigger fires before, or that does not come within :data:`CUT_TIMEOUT`, is not
    injected; that copy runs on as the stage's last.
    ``release(stage)`` (sync) runs before each stage's last copy starts and when a stage ends: the
    test's way to let a wait it holds open end once the cuts are done. After each cut no task of the
    cancelled copy may be left running (a leak would go on watching in a real triggerer).

    ``run_task`` takes an exception of its ``run_trigger`` for a failed try; :attr:`failures` keeps
    them so the test can fail with the runner's own message.
    """

    def __init__(
        self, control: Control, plan: Mapping[str, Sequence[Cut]], release: Callable[[str], None] = lambda stage: None
    ) -> None:
        self.control = control
        self.plan = plan
        self.release = release
        self.stages: dict[str, StageLog] = {}
        self.failures: list[BaseException] = []

    @property
    def cuts(self) -> list[tuple[str, Cut]]:
        return [(stage, cut) for stage, log in self.stages.items() for cut in log.cuts]

    def __call__(self, deferred: Any) -> dict[str, Any]:
        try:
            return asyncio.run(asyncio.wait_for(self._stage(deferred), STAGE_TIMEOUT))
        except BaseException as failure:
            self.failures.append(failure)
            raise

    async def _stage(self, deferred: Any) -> dict[str, Any]:
        stage = str(deferred.stage.value)
        log = self.stages.setdefault(stage, StageLog())
        baseline = asyncio.all_tasks()
        try:
            for cut in self.plan.get(stage, ()):
                log.copies += 1
                reached, task = await self._cut(cut, rebuild(deferred))
                if not reached:
                    break
                log.cuts.append(cut)
                leftover = tasks_left(baseline)
                assert not leftover, f"{stage} trigger cancelled at {cut}: tasks left running: {leftover}"
            else:
                log.copies += 1
                task = asyncio.create_task(serve(rebuild(deferred)))
            await asyncio.to_thread(self.release, stage)
            event = await task
            log.events.append(event)
            return event
        finally:
            await asyncio.to_thread(self.release, stage)

    async def _cut(self, cut: Cut, trigger: Any) -> tuple[bool, asyncio.Task[dict[str, Any]]]:
        """Serve ``trigger`` and cancel it at ``cut``. ``False`` and its still running or finished task
        if it fired first or the point did not come within :data:`CUT_TIMEOUT` (it runs on as the last)."""
        if cut.kind == "mid-list":  # before the trigger starts: its LIST must be slow
            await asyncio.to_thread(self.control.set_faults, f"latency:{LIST_LATENCY}")
        task = asyncio.create_task(serve(trigger))
        try:
            reached = await reach(cut, trigger, task) and task.cancel()
        finally:
            if cut.kind == "mid-list":
                await asyncio.to_thread(self.control.clear_faults)
        if not reached:
            return False, task
        await asyncio.gather(task, return_exceptions=True)
        if not task.cancelled():
            raise AssertionError(f"cancelled at {cut}, the trigger ended with {task.exception() or task.result()}")
        return True, task


class TwinTriggerers:
    """A ``run_trigger`` that serves two copies of each stage's trigger at once and returns the first
    copy's event (the test compares both). ``release(stage)`` runs once both copies watch (or one fired):
    a wait the test holds open ends while both follow it. ``overlapped[stage]``: both were watching.
    :attr:`failures` as for :class:`DyingTriggerer`."""

    def __init__(self, release: Callable[[str], None] = lambda stage: None) -> None:
        self.release = release
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.overlapped: dict[str, bool] = {}
        self.failures: list[BaseException] = []

    def __call__(self, deferred: Any) -> dict[str, Any]:
        try:
            return asyncio.run(asyncio.wait_for(self._stage(deferred), STAGE_TIMEOUT))
        except BaseException as failure:
            self.failures.append(failure)
            raise

    async def _stage(self, deferred: Any) -> dict[str, Any]:
        stage = str(deferred.stage.value)
        copies = [rebuild(deferred), rebuild(deferred)]
        tasks = [asyncio.create_task(serve(copy)) for copy in copies]
        try:
            self.overlapped[stage] = await until(lambda: all(is_watching(copy) for copy in copies), *tasks)
            await asyncio.to_thread(self.release, stage)
            self.events[stage] = list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return self.events[stage][0]


class TaskStateFeed:
    """The task instance state a gang trigger's kill guard reads, answered by the test.

    Install with ``trigger.task_state = feed`` (``GangTrigger.task_state`` reads the triggerer's
    supervisor channel, absent here). ``asked`` is set when the guard asks; it gets ``state`` once
    ``answer`` is set (at once unless ``hold``)."""

    def __init__(self, state: str, *, hold: bool = False) -> None:
        self.state = state
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()
        if not hold:
            self.answer.set()

    async def __call__(self) -> str:
        self.asked.set()
        await self.answer.wait()
        return self.state

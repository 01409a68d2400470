"""The production-shaped suite: opt-out, its table, failure reports with every component's log.

- ``GANG_PRODUCTION=0`` skips it; anything else runs it (``make production``, and ``make test`` in
  its real-tier lane). Without PostgreSQL or
  Redis installed (Debian packages ``postgresql``, ``redis-server``; ``.ci/run`` installs them) the
  tests fail naming the package, unless opted out.
- ``GANG_BURST_GANGS`` sets the burst's size (default :data:`DEFAULT_GANGS`; the issue's nightly
  burst of 200 is ``GANG_BURST_GANGS=200 make production``).
- ``GANG_PRODUCTION_KEEP=1`` keeps the temporary directory (every component's log, the trigger
  logs, PostgreSQL's data) and prints its path.
- Each burst adds a row to the table printed at the end of the session (gangs, tries, kills,
  duplicates, orphans, misrecorded tries, triggers run past their handover, wall time), and a row
  per kill to the reliability table (:mod:`tests.reliability.table`), printed after it.
- A failed test gets a report section with the tail of every component's log; SIGTERM is turned
  into ``KeyboardInterrupt`` once so that every process started is stopped
  (``tests/standalone/conftest.py`` does the same for its suite).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import pytest

from tests.production.deployment import Deployment
from tests.reliability import table as reliability_table

OPTED_OUT = os.environ.get("GANG_PRODUCTION") == "0"
DEFAULT_GANGS = 60


def burst_size() -> int:
    """``GANG_BURST_GANGS`` (50-200 is the issue's range), else :data:`DEFAULT_GANGS`."""
    value = os.environ.get("GANG_BURST_GANGS", str(DEFAULT_GANGS))
    try:
        count = int(value)
    except ValueError:
        raise pytest.UsageError(f"GANG_BURST_GANGS must be a whole number of gangs, got {value!r}") from None
    if not 6 <= count <= 400:
        raise pytest.UsageError(f"GANG_BURST_GANGS must be between 6 and 400, got {count}")
    return count


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not OPTED_OUT:
        return
    skip = pytest.mark.skip(reason="GANG_PRODUCTION=0: the production-shaped suite is skipped")
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here + os.sep):
            item.add_marker(skip)


@dataclass(frozen=True)
class Row:
    scenario: str
    gangs: int
    tries: int
    kills: str
    duplicates: int
    orphans: int
    misrecorded: int
    wrong_states: int
    fired_twice: int
    wall_seconds: float


TABLE: list[Row] = []
COLUMNS = (
    "scenario",
    "gangs",
    "tries",
    "kills",
    "duplicates",
    "orphans",
    "misrecorded tries",
    "wrong end states",
    "triggers run past their handover",
    "wall time",
)


def render_table() -> list[str]:
    cells = [
        COLUMNS,
        *(
            (
                row.scenario,
                row.gangs,
                row.tries,
                row.kills,
                row.duplicates,
                row.orphans,
                row.misrecorded,
                row.wrong_states,
                row.fired_twice,
                f"{row.wall_seconds:.0f} s",
            )
            for row in TABLE
        ),
    ]
    widths = [max(len(str(line[index])) for line in cells) for index in range(len(COLUMNS))]
    lines = [" | ".join(str(value).ljust(width) for value, width in zip(line, widths, strict=True)) for line in cells]
    lines.insert(1, "-|-".join("-" * width for width in widths))
    return lines


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TABLE:
        return
    terminalreporter.section("production: nightly burst, components killed, invariants broken")
    for line in render_table():
        terminalreporter.write_line(line)
    if reliability_table.TABLE:  # each kill's row: the problems of the tasks not finished at the kill
        terminalreporter.section("reliability: the burst's kills (problems of the tasks each could harm)")
        for line in reliability_table.render_table():
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            deployment = getattr(value, "deployment", None)
            if isinstance(deployment, Deployment):
                report.sections.append(
                    (f"Airflow, PostgreSQL and Redis logs ({call.when}, tails)", deployment.describe())
                )
    return report


@pytest.fixture(scope="session", autouse=True)
def _interrupt_on_sigterm() -> Iterator[None]:
    def interrupt(number: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {number}: stopping the production-shaped suite")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

"""The real-Airflow suite: opt-out, failure reports with the component logs, cleanup on SIGTERM.

- ``GANG_STANDALONE=0`` skips every test here (for quick local runs); anything else runs them
  (``make test`` does, through ``make standalone``).
- A failed test gets a report section with the tail of every Airflow component's and cluster's
  log, taken from the :class:`~tests.standalone.environment.Setup` it used.
- SIGTERM (a cancelled CI job) is turned into ``KeyboardInterrupt`` once, so pytest still tears the
  fixtures down and every process started is stopped; further SIGTERMs are ignored until then.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator, Iterator
from types import FrameType

import pytest

from tests.standalone.environment import Setup

OPTED_OUT = os.environ.get("GANG_STANDALONE") == "0"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not OPTED_OUT:
        return
    skip = pytest.mark.skip(reason="GANG_STANDALONE=0: the real-Airflow suite is skipped")
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here + os.sep):
            item.add_marker(skip)


def _setups(item: pytest.Item) -> list[Setup]:
    values = getattr(item, "funcargs", {}).values()
    return [
        value if isinstance(value, Setup) else value.setup
        for value in values
        if isinstance(value, Setup) or isinstance(getattr(value, "setup", None), Setup)
    ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for setup in _setups(item):
            report.sections.append((f"Airflow and cluster logs ({call.when}, tails)", setup.describe()))
    return report


@pytest.fixture(scope="session", autouse=True)
def _interrupt_on_sigterm() -> Iterator[None]:
    def interrupt(number: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {number}: stopping the real-Airflow suite")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

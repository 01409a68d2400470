"""Tables of compared values (the differential tests), written at the end of the run.

Each test adds its row to its report's user properties (:func:`record`); the hooks of
:class:`Tables`, registered by ``tests/real/conftest.py``, read the rows from the reports and write the
tables in the terminal summary. Reports reach the controller of a pytest-xdist run with their user
properties, while a worker's own terminal output is dropped, so the tables are written however the
tests were distributed (https://pytest-xdist.readthedocs.io/en/stable/how-it-works.html).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

PROPERTY = "gang_compared_values"


def record(record_property: Callable[[str, object], None], table: str, row: str, matched: int, compared: int) -> None:
    """Add ``row`` of ``table`` (``matched`` of ``compared`` values alike) to the running test's report."""
    record_property(PROPERTY, [table, row, matched, compared])


class Tables:
    """The rows recorded by the tests that ran (table -> row -> (matched, compared)), written as
    ``<table>: M of N match`` with a line per row."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, tuple[int, int]]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == PROPERTY:
                table, row, matched, compared = value
                self.rows.setdefault(str(table), {})[str(row)] = (int(matched), int(compared))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for table, rows in self.rows.items():
            matched = sum(alike for alike, _ in rows.values())
            compared = sum(total for _, total in rows.values())
            terminalreporter.write_line(f"{table}: {matched} of {compared} match")
            for row, (alike, total) in rows.items():
                terminalreporter.write_line(f"  {row}: {alike} of {total}")

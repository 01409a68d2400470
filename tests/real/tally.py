"""How many compared values of a differential module matched, written to the terminal at its end."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest


@dataclass
class Tally:
    matched: int = 0
    total: int = 0

    def count(self, compared: int, different: int) -> None:
        self.total += compared
        self.matched += compared - different


def reported(pytestconfig: pytest.Config, what: str) -> Iterator[Tally]:
    """A :class:`Tally` for a module fixture to yield; at teardown ``<what>: M of N ...`` is written."""
    counts = Tally()
    yield counts
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"{what}: {counts.matched} of {counts.total} match")

"""The reliability table: every scenario adds its runs; it is printed at the end of the pytest
session (``make test`` shows it; ``tests/production`` prints the rows of its kills), one row per
scenario, every problem column zero.

Scenarios call :func:`report` once per run with the run's :class:`~tests.reliability.harness.Verdict`
and the number of faults injected (from the emulator's request log, or counted by the scenario for
faults injected another way: a cancelled trigger, a kill, a killed process); :func:`record` adds a
run without failing the test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.reliability.harness import Verdict


@dataclass
class Row:
    runs: int = 0
    faults: int = 0
    duplicates: int = 0
    orphans: int = 0
    wrong_steps: int = 0
    misrecorded: int = 0
    problems: list[str] = field(default_factory=list)


TABLE: dict[str, Row] = {}
COLUMNS = (
    "scenario",
    "runs",
    "faults injected",
    "duplicates",
    "orphans",
    "wrong steps or end states",
    "misrecorded tries",
)


def report(scenario: str, verdict: Verdict, *, faults: int) -> None:
    """Add one run of ``scenario`` to the table, then fail the test if the run broke an invariant."""
    record(scenario, verdict, faults=faults)
    assert verdict.problems() == [], f"{scenario}: {verdict.problems()}"


def record(scenario: str, verdict: Verdict, *, faults: int) -> None:
    """Add one run of ``scenario`` to the table."""
    row = TABLE.setdefault(scenario, Row())
    row.runs += 1
    row.faults += faults
    row.duplicates += len(verdict.duplicates)
    row.orphans += len(verdict.orphans)
    row.wrong_steps += len(verdict.wrong_steps)
    row.misrecorded += len(verdict.misrecorded)
    row.problems += verdict.problems()


def render_table() -> list[str]:
    cells = [
        COLUMNS,
        *(
            (name, row.runs, row.faults, row.duplicates, row.orphans, row.wrong_steps, row.misrecorded)
            for name, row in TABLE.items()
        ),
    ]
    widths = [max(len(str(line[index])) for line in cells) for index in range(len(COLUMNS))]
    lines = [" | ".join(str(value).ljust(width) for value, width in zip(line, widths, strict=True)) for line in cells]
    lines.insert(1, "-|-".join("-" * width for width in widths))
    return lines

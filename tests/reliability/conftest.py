"""The reliability suite's table: every scenario adds its runs; the table is printed at the end of
the pytest session (``make test`` shows it), one row per scenario, every problem column zero.

Scenarios call :func:`report` once per run with the run's :class:`~tests.reliability.harness.Verdict`
and the number of faults injected (from the emulator's request log, or counted by the scenario for
faults injected another way: a cancelled trigger, a kill, a killed process).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from gang_sim.testing import ClusterHarness
from tests.e2e.conftest import airflow_db, cluster_factory  # noqa: F401  # the same fixtures as e2e
from tests.reliability.emulator_side import Control, Ledger
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
COLUMNS = ("scenario", "runs", "faults injected", "duplicates", "orphans", "wrong ladder steps", "misrecorded tries")


def report(scenario: str, verdict: Verdict, *, faults: int) -> None:
    """Add one run of ``scenario`` to the table, then fail the test if the run broke an invariant."""
    row = TABLE.setdefault(scenario, Row())
    row.runs += 1
    row.faults += faults
    row.duplicates += len(verdict.duplicates)
    row.orphans += len(verdict.orphans)
    row.wrong_steps += len(verdict.wrong_steps)
    row.misrecorded += len(verdict.misrecorded)
    row.problems += verdict.problems()
    assert verdict.problems() == [], f"{scenario}: {verdict.problems()}"


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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TABLE:
        return
    terminalreporter.section("reliability: faults injected and invariants broken")
    for line in render_table():
        terminalreporter.write_line(line)


@dataclass
class FaultCluster:
    """A simulated cluster with its control endpoints and a ledger following its store."""

    cluster: ClusterHarness
    control: Control
    ledger: Ledger


@pytest.fixture
def fault_cluster_factory(cluster_factory: Any) -> Iterator[Any]:  # noqa: F811
    """``fault_cluster_factory(scenario, time_scale=...)``: a started cluster with a fresh ledger."""
    unsubscribes: list[Any] = []

    def start(scenario: Any = "small", **options: Any) -> FaultCluster:
        cluster = cluster_factory(scenario, **options)
        ledger = Ledger()
        unsubscribes.append((cluster, ledger.attach(cluster)))
        return FaultCluster(cluster, Control(cluster), ledger)

    yield start
    for cluster, unsubscribe in unsubscribes:
        cluster.run(unsubscribe)

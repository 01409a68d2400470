"""The README's table of fallback defaults is the code's."""

from __future__ import annotations

import re
from pathlib import Path

from airflow_provider_gang.reservation import fallback, phases
from airflow_provider_gang.reservation.phases import Reason

README = Path(__file__).resolve().parents[2] / "README.md"


def table_rows() -> dict[str, set[str]]:
    text = README.read_text()
    section = text[text.index("### Which step answers which failure"):]
    section = section[:section.index("\n### ", 5)]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        match = re.match(r"\| `(\w+)\(.*?\)` \| (.+) \|$", line)
        if match:
            rows[match.group(1)] = set(re.findall(r"`(\w+)`", match.group(2)))
    return rows


def test_the_readme_says_which_step_answers_which_failure() -> None:
    rows = table_rows()
    assert set(rows) == set(fallback.STEP_TYPES)
    retryable = {reason.value for reason in Reason if phases.is_retryable(reason)}
    for name, kind in fallback.STEP_TYPES.items():
        documented = retryable if rows[name] == set() else rows[name]
        assert documented == {reason.value for reason in kind.default_reasons}, name

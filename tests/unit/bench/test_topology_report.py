"""``bench.topology``'s report: the median of each gang's repeats, and topology against the anchor."""

from __future__ import annotations

from bench.topology import Run, report, spread


def test_the_report_gives_medians_spans_and_the_ratio_against_the_anchor() -> None:
    runs = [
        Run("kueue", "anchor", 2.0, 4, 2, "a 8, b 8"),
        Run("kueue", "topology", 1.0, 1, 1, "a 16"),
        Run("kueue", "anchor", 4.0, 5, 2, "a 8, b 4, c 4"),
        Run("kueue", "topology", 3.0, 1, 1, "a 16"),
        Run("kueue", "anchor", 3.0, 4, 2, "a 8, b 8"),
        Run("kueue", "topology", 2.0, 1, 1, "a 16"),
    ]
    lines = report("emulator", runs)
    assert lines[0] == "backend emulator: gang of 16 one-GPU members, 3 repeats"
    assert lines[2].startswith("  kueue  | anchor   |   3.00 (2.00, 4.00, 3.00")
    assert lines[2].endswith("|   4-5 |      2 | a 8, b 8")
    assert lines[-1] == "  kueue: topology / anchor - median time to all bound 0.67x, racks 1/4-5, blocks 1/2"
    assert (spread([3, 3]), spread([5, 4, 6])) == ("3", "4-6")

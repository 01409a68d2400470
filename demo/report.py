"""What ``make demo`` prints after the run, from the task's XCom summary (``GangTrainingOperator``'s
return value: one entry per try, the reserved size and zone, exit codes, GPU-hours, rank logs)."""

from __future__ import annotations

import json
from typing import Any

from demo.runner import DEMO_TIME_SCALE


def report(
    state: str, summary: dict[str, Any] | None, elapsed: float, time_scale: float = DEMO_TIME_SCALE
) -> list[str]:
    """The outcome, one table row per try (its reason on the same row: a failed try is one line, not a
    traceback), rank 0's final training loss, GPU-hours; ``time_scale`` is the simulated cluster's speed."""
    lines = [f"Task state: {state} (in {elapsed:.0f} s of wall-clock time)"]
    if summary is None:
        return lines
    header = ("try", "step", "mode", "size", "outcome", "GPU-h reserved/used/idle", "why")
    rows = [
        header,
        *(
            (
                str(item["attempt"]),
                item["step"],
                item["mode"],
                str(item["size"]),
                item["outcome"],
                f"{item['gpu_hours_reserved']:.3f} / {item['gpu_hours_used']:.3f} / {item['gpu_hours_idle']:.3f}",
                item["message"],
            )
            for item in summary["tries"]
        ),
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header) - 1)]
    for row in rows:
        lines.append(
            "  " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + f" | {row[-1]}"
        )
    loss = training_loss(summary)
    lines += [
        f"Reserved: {summary['size_run']} of {summary['size_requested']} members in zone {summary['zone']} "
        f"({summary['provisioning_class']}); fallback step that ran: {summary['fallback_step']}",
        f"Exit codes by rank: {summary['exit_codes']}",
        f"Rank 0 training loss: {loss}" if loss is not None else "Rank 0 training loss: not in its log",
        "GPU-hours over all tries: reserved {gpu_hours_reserved:.3f}, used {gpu_hours_used:.3f}, "
        "idle {gpu_hours_idle:.3f}".format(**summary["all_tries"]),
        "(GPU-hours are measured in wall-clock time; the simulated cluster runs "
        f"{time_scale:.0f}x faster, so a real cluster would take about {time_scale:.0f}x as long)",
    ]
    return lines


def training_loss(summary: dict[str, Any]) -> float | None:
    """The ``mean_final_loss`` rank 0 of ``dags/trainer/ddp_train.py`` prints as its last JSON line."""
    for line in reversed(summary.get("rank_logs", {}).get("0", "").splitlines()):
        try:
            result = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(result, dict) and "mean_final_loss" in result:
            return float(result["mean_final_loss"])
    return None

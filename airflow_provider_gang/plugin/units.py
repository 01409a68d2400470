"""Numbers of the Gang pages in the units people read: ``6.9 s``, ``1 h 02 min``, ``0.012 GPU-h``.

Pure functions of their argument. An absent value is never shown as ``-``: each caller says what
its absence means (``"not reached"`` for a stage a try never got to, ``"none recorded"`` ...),
through the ``missing`` argument.
"""

from __future__ import annotations

SECONDS_PER_HOUR = 3600.0


def duration(seconds: float | None, *, missing: str = "not reached") -> str:
    """``"0.006 s"``, ``"6.9 s"``, ``"42 s"``, ``"12 min 05 s"``, ``"1 h 02 min"``, ``"3 d 4 h"``;
    ``missing`` for ``None``. Negative durations (clocks of two machines) count as zero."""
    if seconds is None:
        return missing
    seconds = max(0.0, float(seconds))
    if seconds < 0.1:
        return f"{seconds:.3f} s".replace("0.000 s", "0 s")
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    whole = round(seconds)
    minutes, second = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {second:02d} s"
    hours, minute = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minute:02d} min"
    days, hour = divmod(hours, 24)
    return f"{days} d {hour} h"


def gpu_hours(gpu_seconds: float | None, *, missing: str = "none recorded") -> str:
    """GPU-seconds as GPU-hours with two significant digits below 10 (``"0.012 GPU-h"``,
    ``"2.5 GPU-h"``), whole ones above (``"128 GPU-h"``); ``"0 GPU-h"`` for zero."""
    if gpu_seconds is None:
        return missing
    hours = max(0.0, float(gpu_seconds)) / SECONDS_PER_HOUR
    if hours == 0:
        return "0 GPU-h"
    if hours >= 10:
        return f"{hours:.0f} GPU-h"
    return f"{float(f'{hours:.2g}'):g} GPU-h"


def members(count: int | None, *, missing: str = "size unknown") -> str:
    """``"1 member"``, ``"8 members"``."""
    if count is None:
        return missing
    return f"{count} member" if count == 1 else f"{count} members"


def reason(value: str | None, *, missing: str = "no outcome recorded") -> str:
    """A stored ``reservation.phases.Reason`` value in words: ``member_lost`` -> ``member lost``."""
    if not value:
        return missing
    return value.replace("_", " ")

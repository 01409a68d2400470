"""RFC 3339 timestamps of Kubernetes objects as epoch seconds (floats), the unit ``now`` uses."""

from __future__ import annotations

from datetime import datetime, timezone


def parse_time(text: object) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp (``2026-08-01T10:00:10Z``), ``None`` if absent or invalid.

    Invalid text reads as "unknown" rather than an error: timestamps only feed messages and cost.
    """
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def format_time(epoch_seconds: float) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix and whole seconds, as the API server writes it."""
    return datetime.fromtimestamp(epoch_seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

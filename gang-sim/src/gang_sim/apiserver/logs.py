"""Container logs, written by the simulated kubelet and served by ``pods/{name}/log``.

``store.logs.append(namespace, pod, container, text)`` adds lines (each stamped with the wall-clock
time it was appended, or ``timestamp=``); ``store.logs.close(namespace, pod, container)`` marks the
container as finished so ``follow`` streams end. Read options mirror ``PodLogOptions``:
``tail_lines``, ``since_seconds``, ``timestamps`` (RFC 3339 with nanoseconds, a space, then the line).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

LogKey = tuple[str, str, str]


def format_timestamp(seconds: float) -> str:
    """RFC 3339 with nanosecond precision, as the kubelet prefixes lines with ``timestamps=true``."""
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    nanos = round((seconds - int(seconds)) * 1e9) % 1_000_000_000
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


@dataclass
class _Stream:
    lines: list[tuple[float, str]] = field(default_factory=list)
    closed: bool = False
    changed: asyncio.Event | None = None

    def notify(self) -> None:
        if self.changed is not None:
            self.changed.set()
            self.changed = None


class PodLogs:
    """Per-container log lines. Single event loop; no locking."""

    def __init__(self, wall_clock: Callable[[], float] = time.time) -> None:
        self._streams: dict[LogKey, _Stream] = {}
        self._wall_clock = wall_clock

    def has_stream(self, namespace: str, pod: str, container: str) -> bool:
        return (namespace, pod, container) in self._streams

    def append(self, namespace: str, pod: str, container: str, text: str, *, timestamp: float | None = None) -> None:
        """Append ``text`` (split on newlines; a trailing newline adds no empty line)."""
        stream = self._streams.setdefault((namespace, pod, container), _Stream())
        moment = self._wall_clock() if timestamp is None else timestamp
        stream.lines.extend((moment, line) for line in text.splitlines())
        stream.notify()

    def close(self, namespace: str, pod: str, container: str) -> None:
        """The container terminated: ``follow`` readers get the rest and stop."""
        stream = self._streams.setdefault((namespace, pod, container), _Stream())
        stream.closed = True
        stream.notify()

    def forget_pod(self, namespace: str, pod: str) -> None:
        """Drop a deleted pod's logs and end its followers."""
        for key in [k for k in self._streams if k[0] == namespace and k[1] == pod]:
            stream = self._streams.pop(key)
            stream.closed = True
            stream.notify()

    def _selected(
        self, key: LogKey, tail_lines: int | None, since_seconds: float | None, now: float | None
    ) -> list[tuple[float, str]]:
        stream = self._streams.get(key)
        lines = list(stream.lines) if stream else []
        if since_seconds is not None:
            cutoff = (self._wall_clock() if now is None else now) - since_seconds
            lines = [entry for entry in lines if entry[0] >= cutoff]
        if tail_lines is not None:
            lines = lines[-tail_lines:] if tail_lines > 0 else []
        return lines

    @staticmethod
    def _render(entries: list[tuple[float, str]], timestamps: bool) -> str:
        if timestamps:
            return "".join(f"{format_timestamp(moment)} {line}\n" for moment, line in entries)
        return "".join(f"{line}\n" for _, line in entries)

    def read(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        tail_lines: int | None = None,
        since_seconds: float | None = None,
        timestamps: bool = False,
        now: float | None = None,
    ) -> str:
        """The selected lines as text."""
        return self._render(self._selected((namespace, pod, container), tail_lines, since_seconds, now), timestamps)

    async def follow(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        tail_lines: int | None = None,
        since_seconds: float | None = None,
        timestamps: bool = False,
    ) -> AsyncIterator[str]:
        """Yield the selected lines, then new ones as they are appended, until the container is closed."""
        key = (namespace, pod, container)
        initial = self._selected(key, tail_lines, since_seconds, None)
        stream = self._streams.setdefault(key, _Stream())
        position = len(stream.lines)
        if initial:
            yield self._render(initial, timestamps)
        while True:
            stream = self._streams.get(key, stream)
            if len(stream.lines) > position:
                chunk, position = stream.lines[position:], len(stream.lines)
                yield self._render(chunk, timestamps)
                continue
            if stream.closed or key not in self._streams:
                return
            if stream.changed is None:
                stream.changed = asyncio.Event()
            await stream.changed.wait()

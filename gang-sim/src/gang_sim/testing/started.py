"""A cluster a test starts and stops: the ``with`` statement over its ``start()`` and ``stop()``.

``with Cluster(...) as cluster:`` starts it on entry and stops it on exit, an exception included
(the context manager protocol, https://docs.python.org/3/reference/datamodel.html#context-managers).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class Started(ABC):
    """Entering starts (and returns the cluster), leaving stops; subclasses define both."""

    @abstractmethod
    def start(self) -> None:
        """Start every part and wait until each answers; on a failure stop what started and raise."""

    @abstractmethod
    def stop(self) -> None:
        """Stop every part started; safe to call when nothing (or not everything) started."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

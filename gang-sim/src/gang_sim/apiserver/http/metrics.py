"""Request counting per verb and resource, read (and reset) at ``/_sim/metrics``.

The provider's API-cost tests assert how many requests an operation makes, so every Kubernetes API
request is counted once, including watches (verb ``watch``) and requests answered with an error.
Resources are named like RBAC does: ``pods``, ``pods/status``, ``provisioningrequests.autoscaling.x-k8s.io``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


class RequestMetrics:
    """Counters keyed by (verb, resource) and by response code."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str]] = Counter()
        self.codes: Counter[int] = Counter()

    def count(self, verb: str, resource: str) -> None:
        self.requests[(verb, resource)] += 1

    def count_code(self, code: int) -> None:
        self.codes[code] += 1

    def reset(self) -> None:
        self.requests.clear()
        self.codes.clear()

    def total(self, verb: str | None = None, resource: str | None = None) -> int:
        return sum(
            n
            for (v, r), n in self.requests.items()
            if (verb is None or v == verb) and (resource is None or r == resource)
        )

    def snapshot(self) -> dict[str, Any]:
        """``{"total": n, "requests": {verb: {resource: n}}, "codes": {"200": n}}``."""
        by_verb: dict[str, dict[str, int]] = {}
        for (verb, resource), number in sorted(self.requests.items()):
            by_verb.setdefault(verb, {})[resource] = number
        return {
            "total": sum(self.requests.values()),
            "requests": by_verb,
            "codes": {str(code): number for code, number in sorted(self.codes.items())},
        }

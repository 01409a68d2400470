"""Injected faults for reliability tests: seeded error rates per verb, latency, cut watch streams.

A spec string (``--faults``) is a comma-separated list of items:

- ``<verb>:<rate>:<code>``: answer ``rate`` (0..1) of requests with that verb (``*`` for any) with
  ``code`` 500 (InternalError), 503 (ServiceUnavailable) or 429 (TooManyRequests + ``Retry-After``);
- ``latency:<seconds>``: delay every Kubernetes API request;
- ``watch-cut:<seconds>``: end every watch stream after that many seconds (clients must resume);
- ``seed:<int>``: seed of the random choice (same seed, same sequence of failures).

Example: ``create:0.2:503,patch:0.1:429,latency:0.01,watch-cut:5,seed:7``. At run time the same
settings are read and replaced as JSON at ``/_sim/faults`` (see :meth:`Faults.to_json`). Faults
apply to resource requests only, never to discovery, OpenAPI or ``/_sim/`` endpoints.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_gang.sim import errors

_REASONS = {500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests"}


@dataclass
class ErrorRate:
    verb: str
    rate: float
    code: int


@dataclass
class Faults:
    """The current fault settings and the seeded random source that draws them."""

    error_rates: list[ErrorRate] = field(default_factory=list)
    latency_seconds: float = 0.0
    watch_cut_seconds: float | None = None
    retry_after_seconds: int = 1
    seed: int | None = None
    _random: random.Random = field(default_factory=random.Random, repr=False)

    @classmethod
    def parse(cls, spec: str | None) -> Faults:
        """Parse a spec string (see module docstring); ValueError on malformed items."""
        faults = cls()
        for item in filter(None, (part.strip() for part in (spec or "").split(","))):
            parts = item.split(":")
            if parts[0] == "latency" and len(parts) == 2:
                faults.latency_seconds = float(parts[1])
            elif parts[0] == "watch-cut" and len(parts) == 2:
                faults.watch_cut_seconds = float(parts[1])
            elif parts[0] == "seed" and len(parts) == 2:
                faults.seed = int(parts[1])
            elif len(parts) == 3 and int(parts[2]) in _REASONS and 0.0 <= float(parts[1]) <= 1.0:
                faults.error_rates.append(ErrorRate(parts[0], float(parts[1]), int(parts[2])))
            else:
                raise ValueError(f"bad fault item {item!r}")
        faults._random = random.Random(faults.seed)
        return faults

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Faults:
        faults = cls(
            error_rates=[ErrorRate(str(e["verb"]), float(e["rate"]), int(e["code"])) for e in body.get("errors", [])],
            latency_seconds=float(body.get("latency_seconds", 0.0)),
            watch_cut_seconds=None if body.get("watch_cut_seconds") is None else float(body["watch_cut_seconds"]),
            retry_after_seconds=int(body.get("retry_after_seconds", 1)),
            seed=None if body.get("seed") is None else int(body["seed"]),
        )
        for rate in faults.error_rates:
            if rate.code not in _REASONS or not 0.0 <= rate.rate <= 1.0:
                raise ValueError(f"bad error rate {rate}")
        faults._random = random.Random(faults.seed)
        return faults

    def to_json(self) -> dict[str, Any]:
        return {
            "errors": [{"verb": e.verb, "rate": e.rate, "code": e.code} for e in self.error_rates],
            "latency_seconds": self.latency_seconds,
            "watch_cut_seconds": self.watch_cut_seconds,
            "retry_after_seconds": self.retry_after_seconds,
            "seed": self.seed,
        }

    def draw_error(self, verb: str) -> errors.ApiError | None:
        """The injected error for one request with ``verb``, if the dice say so."""
        for rate in self.error_rates:
            if rate.verb in ("*", verb) and self._random.random() < rate.rate:
                details: dict[str, Any] = {}
                if rate.code == 429:
                    details["retryAfterSeconds"] = self.retry_after_seconds
                message = {
                    500: "Internal error occurred: injected fault",
                    503: "the server is currently unable to handle the request (injected fault)",
                    429: "the server has received too many requests and has asked us to try again later",
                }[rate.code]
                return errors.ApiError(rate.code, _REASONS[rate.code], message, details=details)
        return None

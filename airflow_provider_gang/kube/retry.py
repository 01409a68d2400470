"""How long to wait before sending a failed request again.

Exponential backoff with full jitter (the AWS architecture blog's "Exponential Backoff And Jitter"),
capped, and never shorter than the server's ``Retry-After`` - the API server sends it with 429 from
API Priority and Fairness and with some 5xx answers, and client-go's ``WithRetry`` honours it the same way.
Randomness is a parameter so tests are deterministic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """Retry budget and backoff curve.

    Fields:
        attempts: total tries per request, including the first (1 disables retrying).
        base_delay: upper bound of the first backoff, in seconds.
        max_delay: cap of any single backoff (also caps an excessive Retry-After).
        rng: source of jitter.
    """

    attempts: int = 10
    base_delay: float = 0.5
    max_delay: float = 30.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def delay(self, failed_attempts: int, retry_after: float | None = None) -> float:
        """Seconds to wait after ``failed_attempts`` (>= 1) consecutive failures."""
        doublings = min(failed_attempts - 1, 64)  # the cap is reached long before; 2**n must stay a float
        ceiling = min(self.max_delay, self.base_delay * (2.0**doublings))
        backoff = self.rng.uniform(0.0, ceiling)
        if retry_after is not None:
            backoff = max(backoff, min(retry_after, self.max_delay))
        return backoff

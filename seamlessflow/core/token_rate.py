"""A token bucket that is charged after the fact (pure): a team's generated tokens per second.

Why charged after: how many tokens a call generates is known only when it ends, so a call is let in while the
bucket is not in debt, and its tokens are taken out when it ends, which may drive the bucket below zero. Until
the rate refills the debt, the team's new calls are refused; `wait_s` says how long that takes, which is the
`Retry-After` a refused call is given. The clock is passed in (seconds, any monotonic origin), so a test moves
time by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class TokenBucket:
    """`rate` tokens a second flow in, up to `burst`; a call's tokens flow out when it ends."""

    rate: float
    burst: float
    level: float
    stamp: float  # when `level` was last brought up to date

    @classmethod
    def full(cls, rate: float, burst: float | None, now: float) -> TokenBucket:
        """A bucket that starts full; without a `burst`, it holds one second of its rate."""
        if rate <= 0:
            raise ValueError(f"a token rate must be positive, got {rate}")
        size = rate if burst is None else burst
        if size <= 0:
            raise ValueError(f"a bucket's burst must be positive, got {size}")
        return cls(rate=rate, burst=size, level=size, stamp=now)

    def refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(self.burst, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def admits(self, now: float) -> bool:
        """A new call may start: the bucket is not in debt."""
        self.refill(now)
        return self.level >= 0

    def charge(self, tokens: int, now: float) -> None:
        """A call ended having generated `tokens`: take them out, into debt if need be."""
        self.refill(now)
        self.level -= max(0, tokens)

    def wait_s(self, now: float) -> float:
        """Seconds until the bucket is out of debt (0 when it is not in debt)."""
        self.refill(now)
        return max(0.0, -self.level / self.rate)


def retry_after(wait_s: float) -> int:
    """A `Retry-After` in whole seconds that is never early, and never 0 (a client would retry at once)."""
    return max(1, math.ceil(wait_s))

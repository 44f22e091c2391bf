"""Fair shares: each team's quota of the proxy (`proxy.teams`), checked before a call takes a generation slot.

Two quotas, each optional per team: sessions generating at once, and generated tokens per second. A session
counts while one of its calls is in flight (a session has no other life the proxy can see: it is opened by
its first call and may never be ended), so a further call of a session already generating is let in. The token
rate is a bucket charged when a call ends with the tokens it generated (`core/token_rate.py`). A call over
either quota gets a 429 with `Retry-After`, which each front door shapes as its API's rate-limit error, so
the agent's SDK raises its own `RateLimitError` and may wait and retry. A team without a quota is let in as
before; every team's calls and tokens are counted on `/metrics` all the same.

The counts are this worker's own: with several workers (`proxy.workers`) each enforces the quota on the
calls it serves.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

from seamlessflow.core.token_rate import TokenBucket, retry_after
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.metrics import ProxyMetrics
from seamlessflow.proxy.options import TeamQuota


class QuotaExceeded(ProxyError):
    """A 429 for a team over its own share, told apart from the proxy being at capacity on `/metrics`."""

    def __init__(self, team: str, quota: str, message: str, retry_after_s: int):
        super().__init__(429, message, retry_after=retry_after_s)
        self.team, self.quota = team, quota


class Quotas:
    """The teams' shares and what each team holds now: its generating sessions and its token bucket."""

    def __init__(self, teams: Mapping[str, TeamQuota], metrics: ProxyMetrics, retry_after_s: int,
                 clock: Callable[[], float] = time.monotonic):
        self.teams = dict(teams)
        self.metrics = metrics
        self.retry_after_s = retry_after_s  # for a session quota: when a session will end is not known
        self.clock = clock
        now = clock()
        self.buckets = {team: TokenBucket.full(q.tokens_per_s, q.burst_tokens, now)
                        for team, q in self.teams.items() if q.tokens_per_s is not None}
        self.generating: dict[str, dict[str, int]] = {}  # team -> session id -> its calls in flight

    @asynccontextmanager
    async def hold(self, team: str, session_id: str) -> AsyncIterator[None]:
        """Held while a call of `team`'s session is in flight; raises `QuotaExceeded` when it may not start."""
        self.check(team, session_id)
        sessions = self.generating.setdefault(team, {})
        sessions[session_id] = sessions.get(session_id, 0) + 1
        self.metrics.team_admitted.labels(team).inc()
        self.metrics.team_sessions.labels(team).set(len(sessions))
        try:
            yield
        finally:
            sessions[session_id] -= 1
            if sessions[session_id] <= 0:
                del sessions[session_id]
            self.metrics.team_sessions.labels(team).set(len(sessions))
            if not sessions:
                self.generating.pop(team, None)

    def check(self, team: str, session_id: str) -> None:
        quota = self.teams.get(team)
        if quota is None:
            return
        sessions = self.generating.get(team, {})
        if quota.max_sessions is not None and session_id not in sessions and len(sessions) >= quota.max_sessions:
            self._refuse(team, "sessions", f"team {team!r} has {len(sessions)} sessions generating, its quota "
                                           f"(proxy.teams.{team}.max_sessions); retry when one is done",
                         self.retry_after_s)
        bucket = self.buckets.get(team)
        if bucket is not None and not bucket.admits(now := self.clock()):
            self._refuse(team, "tokens", f"team {team!r} generated more than its quota of {bucket.rate:g} tokens/s "
                                         f"(proxy.teams.{team}.tokens_per_s); retry later",
                         retry_after(bucket.wait_s(now)))

    def charge(self, team: str, tokens: int) -> None:
        """A call of `team` ended having generated `tokens` (whether or not it succeeded)."""
        if tokens <= 0:
            return
        self.metrics.team_tokens.labels(team).inc(tokens)
        bucket = self.buckets.get(team)
        if bucket is not None:
            bucket.charge(tokens, self.clock())

    def _refuse(self, team: str, quota: str, message: str, retry_after_s: int) -> None:
        self.metrics.team_refused.labels(team, quota).inc()
        raise QuotaExceeded(team, quota, message, retry_after_s)

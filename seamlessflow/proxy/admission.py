"""Admission: a bounded number of calls generate at once, a bounded number wait; the rest get 429.

The counters live here, with the only code that changes them: the server's health and metrics routes and the
service's heartbeat read `running` and `waiting`, none of them writes.
"""

from __future__ import annotations

import asyncio
from collections import deque

from seamlessflow.proxy.errors import ProxyError


class Admission:
    """Generation slots and a waiting line in front of them; waiting counts as queue depth. A freed slot passes
    to the first in line (no one overtakes it), and a call finds a free slot without awaiting anything."""

    def __init__(self, max_running: int, max_waiting: int, wait_timeout_s: float, retry_after_s: int):
        self.max_running, self.max_waiting = max_running, max_waiting
        self.wait_timeout_s, self.retry_after_s = wait_timeout_s, retry_after_s
        self._line: deque[asyncio.Future[None]] = deque()  # each resolved when a slot is handed to it
        self.waiting = 0
        self.running = 0

    async def enter(self) -> None:
        """A call takes a slot to generate (`leave` gives it back): 429 when slots and line are full, 503 when no
        slot frees in time."""
        if self.waiting + self.running >= self.max_running + self.max_waiting:
            raise ProxyError(429, "the proxy is at capacity; retry shortly", retry_after=self.retry_after_s)
        if self.running < self.max_running and not self._line:
            self.running += 1
            return
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(handed)
        self._hand_free()
        self.waiting += 1
        try:
            async with asyncio.timeout(self.wait_timeout_s):
                await handed
        except BaseException as exc:
            if handed.done() and not handed.cancelled():
                self.leave()  # the slot came as the wait ended: it goes on to the next in line
            else:
                handed.cancel()  # `_hand_free` passes over it
            if isinstance(exc, TimeoutError):
                raise ProxyError(
                    503, "no generation slot became free in time; retry", retry_after=self.retry_after_s
                ) from None
            raise
        finally:
            self.waiting -= 1

    def leave(self) -> None:
        self.running -= 1
        self._hand_free()

    def _hand_free(self) -> None:
        """Free slots go to the calls first in line that still wait, in order."""
        line = self._line
        while line and self.running < self.max_running:
            handed = line.popleft()
            if not handed.done():
                handed.set_result(None)
                self.running += 1  # that call's now

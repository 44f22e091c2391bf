"""Admission: a bounded number of calls generate at once, a bounded number wait; the rest get 429.

The counters live here, with the only code that changes them: the server's health and metrics routes and the
service's heartbeat read `running` and `waiting`, none of them writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from seamlessflow.proxy.errors import ProxyError


class Admission:
    """Generation slots and a waiting line in front of them; waiting counts as queue depth."""

    def __init__(self, max_running: int, max_waiting: int, wait_timeout_s: float, retry_after_s: int):
        self.max_running, self.max_waiting = max_running, max_waiting
        self.wait_timeout_s, self.retry_after_s = wait_timeout_s, retry_after_s
        self._slots = asyncio.Semaphore(max_running)
        self.waiting = 0
        self.running = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Held while a call generates: 429 when slots and line are full, 503 when no slot frees in time."""
        if self.waiting + self.running >= self.max_running + self.max_waiting:
            raise ProxyError(429, "the proxy is at capacity; retry shortly", retry_after=self.retry_after_s)
        if self._slots.locked():  # wait in line; a free slot is taken at once, without arming a timer
            self.waiting += 1
            try:
                async with asyncio.timeout(self.wait_timeout_s):
                    await self._slots.acquire()
            except TimeoutError:
                raise ProxyError(
                    503, "no generation slot became free in time; retry", retry_after=self.retry_after_s
                ) from None
            finally:
                self.waiting -= 1
        else:
            await self._slots.acquire()  # never suspends: a slot is free and no one waits for it
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._slots.release()

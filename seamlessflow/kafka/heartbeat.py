"""A resource's heartbeat on the status topic, written once: what to send, where, how often, never fatal.

Why one heartbeat: every service tells the status topic what it is and does (the scheduler places work by
it, `status` and the dashboard show it, the metrics sink plots its figures), and each one used to write the
same throttle, the same key and the same "a lost heartbeat only delays the table" handling its own way (a
throttle in the worker loops, a thread in the rollout worker, an asyncio task in the proxy). Here the owner
says only how to build its status now; the heartbeat sends it keyed by the resource id, at most once per
period unless told otherwise, and logs instead of raising when the record cannot be queued.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from seamlessflow.messages import ResourceStatus

log = logging.getLogger(__name__)

Send = Callable[[str, str, ResourceStatus], object]  # topic, key, status; may return an awaitable (the proxy's)


def worker_resource_id(kind: str, group: str) -> str:
    """One id per worker process of a pool: pools scale by adding workers, and each one shows in the table."""
    return f"{kind}.{group}.{socket.gethostname()}-{os.getpid()}"


class Heartbeat:
    """`status()` builds the heartbeat now; `send` queues it on `topic` (fire and forget)."""

    def __init__(self, send: Send, topic: str, period_s: float, status: Callable[[], ResourceStatus]):
        self.send, self.topic, self.period_s, self.status = send, topic, period_s, status
        self._next = 0.0  # monotonic time of the next due beat

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def soon(self) -> None:
        """The next `beat` goes out whatever the period (news worth telling: a step, a command)."""
        self._next = 0.0

    def beat(self, force: bool = False) -> bool:
        """Sends the status now if a period has passed since the last beat (or `force`); True if queued."""
        if not force and not self.due():
            return False
        self._next = time.monotonic() + self.period_s
        return self.publish(self.status()) is not False

    def publish(self, status: ResourceStatus) -> object:
        """Sends one status (a heartbeat, or the last one: stopped, failed) keyed by its resource id; what
        `send` returned, or False when it raised (logged: a lost heartbeat only delays the table)."""
        try:
            return self.send(self.topic, status.resource_id, status)
        except Exception as exc:  # noqa: BLE001 - whatever the producer raises, the service goes on
            log.warning("%s: heartbeat not queued: %s", status.resource_id, exc)
            return False

    def run(self, stop: threading.Event) -> None:
        """A thread's body: one beat per period until `stop` (the first one period after the start)."""
        while not stop.wait(self.period_s):
            try:
                self.beat(force=True)
            except Exception:  # building the status failed: the next period tries again
                log.exception("heartbeat failed")

    async def run_async(self, deliver_s: float = 10.0) -> None:
        """An asyncio task's body (until cancelled): one beat per period, each waited for up to `deliver_s`
        when `send` returns an awaitable, so a dead broker shows as a logged miss, not a pile of sends."""
        while True:
            try:
                sent = self.publish(self.status())
                if inspect.isawaitable(sent):
                    async with asyncio.timeout(deliver_s):
                        await sent
            except Exception as exc:  # noqa: BLE001 - a missed heartbeat is logged; the next one retries
                log.warning("heartbeat not published: %s", exc)
            await asyncio.sleep(self.period_s)

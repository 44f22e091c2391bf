"""Stopping the proxy must not depend on luck: a cancel that lands with a delivery still stops the loop.

Python 3.11's `asyncio.wait_for` returns the inner result when the cancel and the inner completion meet in
one loop turn, so a `while True` loop around it never ends and `stop()` waits for ever (seen once in CI).
"""

from __future__ import annotations

import asyncio

from seamlessflow.proxy import ProxyOptions, ProxyService


class HeldPublisher:
    """Records each publish and hands back a future the test settles by hand."""

    def __init__(self) -> None:
        self.futures: list[asyncio.Future] = []

    def publish(self, topic, key, message) -> asyncio.Future:
        self.futures.append(asyncio.get_running_loop().create_future())
        return self.futures[-1]


async def test_heartbeat_loop_stops_when_cancelled_as_its_delivery_lands(settings):
    service = ProxyService(settings, options=ProxyOptions.model_validate({"port": 0, "engines": [], "heartbeat_s": 1}))
    publisher = HeldPublisher()
    service.heartbeat.send = publisher.publish
    task = asyncio.create_task(service.heartbeat.run_async())
    while not publisher.futures:
        await asyncio.sleep(0.01)
    publisher.futures[0].set_result(None)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=3)
    assert done == {task} and task.cancelled()

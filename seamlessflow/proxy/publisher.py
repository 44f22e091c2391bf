"""Kafka producer for the event loop: `publish()` returns at once, its future resolves on broker ack.

The producer is idempotent with acks=all (seamlessflow.kafka.clients.producer_config). librdkafka
delivers callbacks from `poll()`, which a small thread calls; each callback hands the outcome back to the
event loop. The request path thus never blocks on Kafka, yet a response completes only after its events
are acknowledged.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.io import DeliveryFailed, MessageProducer


class PublishFailed(RuntimeError):
    pass


class EventPublisher:
    def __init__(self, settings: Settings, codec: Codec, **extra: Any):
        self.codec = codec
        self._producer = MessageProducer(settings, codec, **extra)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll_loop, name="proxy-producer-poll", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread.start()

    def publish(self, topic: str, key: str | None, message: Any) -> asyncio.Future:
        """Encode and enqueue; the future gets None on delivery or a PublishFailed. A message the codec
        refuses (e.g. `RecordTooLarge`) raises here, before anything is sent."""
        return self._send(lambda on_delivery: self._producer.send(topic, key, message, on_delivery=on_delivery,
                                                                  block=False))

    def publish_tombstone(self, topic: str, key: str) -> asyncio.Future:
        """A record without a value: on a compacted topic it deletes `key` (a stored response's delete)."""
        return self._send(lambda on_delivery: self._producer.send_bytes(topic, key, None, on_delivery=on_delivery,
                                                                        block=False))

    def _send(self, send: Callable[[Callable[[object, object], None]], None]) -> asyncio.Future:
        loop = self._loop or asyncio.get_running_loop()
        future = loop.create_future()

        def on_delivery(err: object, _msg: object) -> None:  # librdkafka's error (or None), the message
            loop.call_soon_threadsafe(_settle, future, err)

        try:  # never waits: a full queue fails this call (a fatal producer is replaced for the next one)
            send(on_delivery)
        except DeliveryFailed as exc:
            raise PublishFailed(str(exc)) from exc
        return future

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)

    def close(self, timeout_s: float = 10.0) -> int:
        """Flush what is queued; returns the number of records left undelivered."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        return self._producer.close(timeout_s)  # lets librdkafka's threads go now, not at garbage collection


def _settle(future: asyncio.Future, err: object) -> None:
    if future.done():
        return
    if err is None:
        future.set_result(None)
    else:
        future.set_exception(PublishFailed(str(err)))

"""A compacted Kafka topic as a keyed store any proxy worker reads: the stored responses (`store: true`) on the
responses topic, and the Conversations API's conversations on theirs (`state.py` and `conversations.py` use it).

Why on Kafka: a client chains `previous_response_id` through whichever worker the kernel hands its connection
to, and expects its responses to outlive a proxy restart; the data plane is already Kafka, so the state is a
compacted topic keyed by response id, with no database beside it and no client pinned to a worker.

- A write waits for Kafka's acknowledgement (as a call's token events do) before the client is answered, then
  enters this worker's cache. A record the codec refuses (over `max_record_bytes`) raises before anything is
  sent: nothing is half-written.
- Every worker follows the topic from its beginning in a thread (`TableFeed`) into a cache bounded in bytes
  (least recently used out first).
- Every read first waits (up to `wait_s`) until the cache holds all that was on the topic when the read came:
  it takes the topic's high watermarks itself (one query, milliseconds; the reads that arrive while one is
  out share it) and compares them with what the cache has applied, so an up-to-date read never waits on the
  follower's poll; otherwise it waits until the follower's records reach the cache. A response another
  worker stored or deleted a moment ago is then seen as such, and an id still missing was not on the topic
  (None). If the follower cannot catch up in time, a read of a response this worker
  holds gets it as last known, and any other raises `NotCaughtUp` (a retryable answer, never a false "not
  found"). Once the cache has evicted anything, a miss also reads the topic itself (a scan: the rare path,
  the price of the bound).
- A delete is a tombstone; the follower drops the id from every worker's cache.

A store is one topic, one record type and the field that keys it (`kind`, `key`): `StoredResponse` by response
id, `StoredConversation` by conversation id.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.reader import Record, read_topic
from seamlessflow.kafka.table_feed import TableFeed, TableUnavailable
from seamlessflow.messages import StoredResponse
from seamlessflow.proxy.publisher import EventPublisher

log = logging.getLogger(__name__)
RECORD_OVERHEAD = 256  # bytes a cached record costs besides its strings and ids
POLL_S = 0.05  # the follower's poll; reads never wait on it (they compare their own marks with the cache)


class NotCaughtUp(Exception):
    """The follower did not read the topic up to the read's marks in time: the answer is not known yet."""


def size_of(stored: Any) -> int:
    """About what a record costs in memory: its strings, and ~8 bytes a slot of its id lists."""
    values = [getattr(stored, f.name) for f in dataclasses.fields(stored)]
    strings = sum(len(v) for v in values if isinstance(v, str))
    return RECORD_OVERHEAD + strings + 8 * sum(len(v) for v in values if isinstance(v, list | tuple))


class StoredCache:
    """Stored responses by id, least recently used out first past `budget_bytes`; `evicted` says whether
    any was ever dropped for room (then a miss may be a record the topic still holds)."""

    def __init__(self, budget_bytes: int, key: str = "response_id"):
        self.budget_bytes, self.bytes, self.evicted, self.key = budget_bytes, 0, False, key
        self._items: OrderedDict[str, tuple[Any, int]] = OrderedDict()

    def get(self, response_id: str) -> Any:
        found = self._items.get(response_id)
        if found is None:
            return None
        self._items.move_to_end(response_id)
        return found[0]

    def put(self, stored: Any) -> None:
        key = getattr(stored, self.key)
        self.drop(key)
        size = size_of(stored)
        self._items[key] = (stored, size)
        self.bytes += size
        while self.bytes > self.budget_bytes and len(self._items) > 1:
            _, (_, dropped) = self._items.popitem(last=False)
            self.bytes -= dropped
            self.evicted = True

    def drop(self, response_id: str) -> None:
        found = self._items.pop(response_id, None)
        if found is not None:
            self.bytes -= found[1]

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class _Sync:
    """A read waiting for the cache to reach the topic's high watermarks (`marks`) taken when it came."""

    future: asyncio.Future
    marks: dict[int, int]


class TopicStore:
    def __init__(self, settings: Settings, codec: Codec, publisher: EventPublisher, topic: str, cache_bytes: int,
                 wait_s: float, delivery_timeout_s: float, kind: type = StoredResponse, key: str = "response_id"):
        self.settings, self.codec, self.publisher, self.topic = settings, codec, publisher, topic
        self.kind, self.key = kind, key
        self.cache = StoredCache(cache_bytes, key)
        self.wait_s, self.delivery_timeout_s = wait_s, delivery_timeout_s
        self._syncs: list[_Sync] = []  # touched on the event loop only
        self._deleting: set[str] = set()  # deleted here, tombstone not read back yet: an older record stays out
        self._applied: dict[int, int] = {}  # partition -> next offset the cache has applied (or the end seen)
        self._marks_wanted: list[asyncio.Future] = []  # reads waiting for the next watermark query
        self._marks_pump: asyncio.Future | None = None
        self._feed: TableFeed | None = None
        self._feed_open: asyncio.Event | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- life ----------------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._feed_open = asyncio.Event()
        self._thread = threading.Thread(target=self._follow, name=f"proxy-{self.key}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=5)

    # -- the request path ------------------------------------------------------------------------------
    async def get(self, response_id: str) -> Any:
        """The stored response, or None when it is not on the topic (never stored, deleted, compacted away)."""
        if self._thread is None:  # not following (a server that was never started): this worker's own only
            return self.cache.get(response_id)
        try:
            await self._caught_up()
        except NotCaughtUp:
            if (known := self.cache.get(response_id)) is not None:
                return known
            raise
        found = self.cache.get(response_id)
        if found is None and self.cache.evicted:
            found = await asyncio.to_thread(self._scan, response_id)
            if found is not None:
                self.cache.put(found)
        return found

    async def put(self, stored: Any) -> None:
        """Stored once Kafka acknowledged it; RecordTooLarge (nothing sent), PublishFailed or TimeoutError."""
        future = self.publisher.publish(self.topic, getattr(stored, self.key), stored)
        async with asyncio.timeout(self.delivery_timeout_s):
            await future
        self.cache.put(stored)

    async def delete(self, response_id: str) -> None:
        future = self.publisher.publish_tombstone(self.topic, response_id)
        async with asyncio.timeout(self.delivery_timeout_s):
            await future
        self.cache.drop(response_id)
        if self._thread is not None:
            self._deleting.add(response_id)

    async def _caught_up(self) -> None:
        """Returns once the cache has applied the topic up to its high watermarks as of now (NotCaughtUp when
        that takes longer than `wait_s`)."""
        assert self._loop is not None and self._feed_open is not None  # start() ran
        try:
            async with asyncio.timeout(self.wait_s):
                await self._feed_open.wait()
                marks = await self._marks()
                if self._reached(marks):
                    return
                sync = _Sync(self._loop.create_future(), marks)
                self._syncs.append(sync)
                try:
                    await sync.future
                finally:
                    if sync in self._syncs:
                        self._syncs.remove(sync)
        except TimeoutError:
            raise NotCaughtUp(f"the {self.topic} topic was not read up to date within {self.wait_s} s") from None

    async def _marks(self) -> dict[int, int]:
        """The topic's high watermarks, from a query that started after this read came (one that started
        before could miss a record acknowledged just before it); the reads that arrive while a query is out
        share the next one."""
        assert self._loop is not None
        wanted = self._loop.create_future()
        self._marks_wanted.append(wanted)
        if self._marks_pump is None or self._marks_pump.done():
            self._marks_pump = asyncio.ensure_future(self._pump_marks())
        return await wanted

    async def _pump_marks(self) -> None:
        while self._marks_wanted:
            wanted, self._marks_wanted = self._marks_wanted, []
            assert self._feed is not None
            try:
                marks = await asyncio.to_thread(self._feed.marks)
            except (TableUnavailable, RuntimeError) as exc:  # no answer in time, or the feed closed by a stop
                for future in wanted:
                    if not future.done():
                        future.set_exception(NotCaughtUp(f"the {self.topic} topic's ends are unknown: {exc}"))
                continue
            for future in wanted:
                if not future.done():
                    future.set_result(marks)

    def _reached(self, marks: dict[int, int]) -> bool:
        return all(self._applied.get(p, 0) >= high for p, high in marks.items())

    def _scan(self, response_id: str) -> Any:
        """The topic's newest record for one id (a tombstone: None), read through."""
        key, found = response_id.encode(), None
        for record in read_topic(self.settings, self.topic, self.codec, timeout_s=self.wait_s * 10):
            if record.key == key:
                found = record.message if isinstance(record.message, self.kind) else None
        return found

    # -- the follower's thread -------------------------------------------------------------------------
    def _follow(self) -> None:
        feed: TableFeed | None = None
        try:
            feed = self._open()
            if feed is not None:
                self._opened(feed)
            while feed is not None and not self._stop.is_set():
                before = dict(feed.read_to)
                records = feed.poll(POLL_S)
                if records or feed.read_to != before:  # an end-of-partition event moves read_to alone
                    self._hand_over(records, dict(feed.read_to))
        except Exception:  # noqa: BLE001 - a dead follower must be visible: reads then wait and answer 503
            log.exception("the follower of %s stopped", self.topic)
        finally:
            if feed is not None:
                feed.close()

    def _opened(self, feed: TableFeed) -> None:
        assert self._loop is not None and self._feed_open is not None
        self._feed = feed  # the marks consumer is used from the reads' threads; the reading one stays here
        self._loop.call_soon_threadsafe(self._feed_open.set)

    def _open(self) -> TableFeed | None:
        """The feed, once Kafka answers (tried again every few seconds, so a stop is never kept waiting)."""
        while not self._stop.is_set():
            try:
                return TableFeed(self.settings, self.topic, self.codec, name=f"proxy-{self.topic}", timeout_s=3.0)
            except TableUnavailable as exc:
                log.warning("%s not readable yet: %s", self.topic, exc)
        return None

    def _hand_over(self, records: list[Record], read_to: dict[int, int]) -> None:
        """Applies the records, then wakes the reads they satisfy, in that order, on the event loop."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._apply, records, read_to)

    def _apply(self, records: list[Record], read_to: dict[int, int]) -> None:
        for record in records:
            if record.key is None:
                continue
            response_id = record.key.decode()
            if record.value is None:
                self.cache.drop(response_id)
                self._deleting.discard(response_id)
            elif isinstance(record.message, self.kind):
                if response_id not in self._deleting:
                    self.cache.put(record.message)
            else:
                log.warning("%s[%d]@%d skipped: %s", record.topic, record.partition, record.offset, record.error)
        self._applied = read_to
        for sync in [sync for sync in self._syncs if self._reached(sync.marks)]:
            self._syncs.remove(sync)
            if not sync.future.done():
                sync.future.set_result(None)

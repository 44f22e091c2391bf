"""TopicStore on the real broker: a bounded cache that reads through to the topic once it evicted, a second
store (another worker) that finds what the first wrote by catching up, and deletes seen by both."""

from __future__ import annotations

from seamlessflow.messages import StoredResponse
from seamlessflow.proxy.publisher import EventPublisher
from seamlessflow.proxy.topic_store import StoredCache, TopicStore, size_of
from seamlessflow.topics import Topics


def stored(response_id: str, team: str = "alpha") -> StoredResponse:
    return StoredResponse(response_id, response_id, "s", team, "run", None, "[]", '{"output": []}', "[]",
                          [1, 2, 3], [4], [0], 1)


def test_the_cache_drops_the_least_recently_used_past_its_budget_and_says_so():
    cache = StoredCache(2 * size_of(stored("resp_a")))
    cache.put(stored("resp_a"))
    cache.put(stored("resp_b"))
    assert cache.get("resp_a") is not None and not cache.evicted  # a is now the most recent
    cache.put(stored("resp_c"))
    assert cache.get("resp_b") is None and cache.get("resp_a") is not None and cache.evicted
    cache.drop("resp_a")
    assert len(cache) == 1 and cache.bytes == size_of(stored("resp_c"))


async def test_a_store_reads_through_after_evicting_and_another_store_catches_up(settings, codec):
    publisher = EventPublisher(settings, codec)
    publisher.start()
    topic = Topics(settings).responses
    small = TopicStore(settings, codec, publisher, topic, 2 * size_of(stored("resp_a")), 5.0, 10.0)
    other = TopicStore(settings, codec, publisher, topic, 1 << 20, 5.0, 10.0)
    small.start()
    other.start()
    try:
        for name in ("resp_a", "resp_b", "resp_c"):
            await small.put(stored(name))
        assert small.cache.evicted and small.cache.get("resp_a") is None
        assert await small.get("resp_a") == stored("resp_a")  # read through: a scan of the topic
        assert await other.get("resp_c") == stored("resp_c")  # written by another: found once caught up
        assert await other.get("resp_nothing") is None
        await other.delete("resp_c")
        assert await other.get("resp_c") is None
        assert await small.get("resp_c") is None  # the tombstone reached the other worker too
    finally:
        small.stop()
        other.stop()
        publisher.close()

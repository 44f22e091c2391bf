"""TableFeed: a compacted topic read from its beginning, and "read up to the marks taken then" (the real broker)."""

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.table_feed import TableFeed
from seamlessflow.messages import StoredResponse
from seamlessflow.topics import Topics


def stored(response_id: str) -> StoredResponse:
    return StoredResponse(response_id, response_id, "s", "team", "run", None, "[]", "{}", "[]", [1], [2], [0], 1)


def test_it_reads_history_and_live_records_and_tombstones_and_knows_when_it_is_up_to_date(settings, codec):
    topic = Topics(settings).responses
    producer = MessageProducer(settings, codec)
    producer.send_and_wait(topic, "resp_a", stored("resp_a"))
    feed = TableFeed(settings, topic, codec)
    try:
        marks = feed.marks()
        assert sum(marks.values()) == 1 and not feed.reached(marks)
        seen = []
        while not feed.reached(marks):
            seen += feed.poll(0.1)
        assert [(r.key, r.message.response_id) for r in seen] == [(b"resp_a", "resp_a")]
        producer.send_bytes(topic, "resp_a", None)
        producer.flush()
        later = feed.marks()
        assert not feed.reached(later)
        tombstones = []
        while not feed.reached(later):
            tombstones += feed.poll(0.1)
        assert [(r.key, r.value, r.message) for r in tombstones] == [(b"resp_a", None, None)]
    finally:
        feed.close()
        producer.close()

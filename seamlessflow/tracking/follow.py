"""Follows the topics a tracker or the dashboard reads (status, weights, eval, optionally session-events)
as one consumer, decoding each record with the project codec.

The `eval` topic is read by name (`<prefix>.eval`) whether or not this checkout declares it; a record
there is an evaluation if it decodes to a message with `version` and accuracy/mean_reward/mean_length,
or if it is a JSON object with those keys (what an external evaluator can publish without our codec).
A topic that does not exist yet is picked up once created (metadata is refreshed every few seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from seamlessflow.avro import Codec, CodecError
from seamlessflow.config import Settings
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.topics import Topics
from seamlessflow.tracking.points import eval_result

log = logging.getLogger(__name__)


def eval_topic(settings: Settings) -> str:
    return f"{settings.topic_prefix}.eval"


@dataclass(frozen=True)
class Incoming:
    topic: str
    timestamp_ms: int
    message: object  # a decoded dataclass, or an EvalFigures


class Follower:
    """One consumer over `names` (short topic names) plus the eval topic; `poll` returns decoded records."""

    def __init__(self, settings: Settings, group_id: str, names: Iterable[str] = ("status", "weights"),
                 codec: Codec | None = None):
        from seamlessflow.kafka.codecs import codec_for

        topics = Topics(settings)
        self.topics = [topics.specs[name].full_name for name in names] + [eval_topic(settings)]
        self.eval_topic = eval_topic(settings)
        self.codec = codec or codec_for(settings)
        # raw records (no codec in the subscriber): the eval topic may carry plain JSON from outside
        self._subscriber = Subscriber(settings, None, None, group_id=group_id, config={
            "topic.metadata.refresh.interval.ms": 3000, "fetch.wait.max.ms": 100,
            "allow.auto.create.topics": False})
        self._subscriber.subscribe(self.topics)

    def poll(self, max_records: int = 500, timeout_s: float = 0.5) -> list[Incoming]:
        out = []
        for record in self._subscriber.poll(timeout_s, max_records):
            message = self._decode(record.topic, record.value)
            if message is not None:
                out.append(Incoming(record.topic, record.timestamp_ms, message))
        return out

    def _decode(self, topic: str, value: bytes | None) -> object | None:
        try:
            message = self.codec.decode(value)
        except CodecError:
            return eval_result(value) if topic == self.eval_topic and value else None
        return (eval_result(message) or message) if topic == self.eval_topic else message

    def commit(self) -> None:
        self._subscriber.commit_consumed()

    def close(self) -> None:
        self._subscriber.close()

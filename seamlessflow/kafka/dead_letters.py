"""One policy for a record a consumer cannot use: a `DeadLetter` with the reason, then go on.

Why one helper: every long-running consumer meets the same poison (bytes that are not Confluent-framed
Avro, a schema id the registry does not know, a truncated record, a message type its topic does not
carry), and each used to decide alone: some dead-lettered, some logged, some skipped silently. Here the
decision and the letter are made once. A letter's id is `<service>:<topic>/<partition>/<offset>` (plus a
detail when one record yields several letters), so a record read again after a restart gives the same
id and a reader of the dead-letter topic can de-duplicate. Several services reading one topic (the
control topic, say) each file their own letter: each says that *it* could not use the record.
A tombstone (no value) on a compacted topic is not poison: it is skipped without a letter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from seamlessflow.avro import Codec, CodecError
from seamlessflow.config import Settings
from seamlessflow.kafka.records import letter_for
from seamlessflow.messages import DeadLetter
from seamlessflow.topics import Topics

log = logging.getLogger(__name__)

Send = Callable[[str, "str | None", DeadLetter], Any]  # (topic, key, letter), e.g. MessageProducer.send


def classify(
    codec: Codec, value: bytes | None, carries: tuple[str, ...] | None, topic: str = ""
) -> tuple[Any, str | None]:
    """(message, None) for a usable record; (None, reason) for poison; (None, None) for a tombstone."""
    if value is None:
        return None, None
    try:
        message = codec.decode(value)
    except CodecError as exc:
        return None, f"undecodable: {exc}"
    reason = misplaced(message, carries, topic)
    return (None, reason) if reason else (message, None)


def misplaced(message: Any, carries: tuple[str, ...] | None, topic: str) -> str | None:
    """Why a decoded message does not belong on `topic` (None when it does, or when nothing is declared)."""
    if carries is None or type(message).__name__ in carries:
        return None
    return f"unexpected {type(message).__name__} on {topic} (it carries {', '.join(carries)})"


class DeadLetters:
    """Decodes what a consumer reads; files a letter for poison and returns None so the caller goes on."""

    def __init__(self, settings: Settings, codec: Codec, service: str, send: Send):
        topics = Topics(settings)
        self.codec, self.service, self.send = codec, service, send
        self.team, self.run = settings.team, settings.run
        self.topic = topics.dead_letter
        self._carries = {spec.full_name: spec.values for spec in topics.specs.values()}
        self.count = 0

    def decode_record(self, record: Any) -> Any:
        """A `reader.Record`'s decoded message, or None (poison, now dead-lettered, or a tombstone). The
        record was decoded when it was read; here it is judged: did it decode, does its topic carry it."""
        if record.value is None:
            return None
        if record.error is not None:
            self.file(
                record.topic, record.partition, record.offset, record.key, record.value, f"undecodable: {record.error}"
            )
            return None
        reason = misplaced(record.message, self._carries.get(record.topic), record.topic)
        if reason is not None:
            self.file(record.topic, record.partition, record.offset, record.key, record.value, reason)
            return None
        return record.message

    def file(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None, reason: str,
             detail: str = "") -> DeadLetter:
        letter = letter_for(self.service, topic, partition, offset, key, value, reason, self.team, self.run, detail)
        log.warning("%s: %s[%d]@%d dead-lettered: %s", self.service, topic, partition, offset, reason)
        self.send(self.topic, key.decode("utf-8", "replace") if key is not None else None, letter)
        self.count += 1
        return letter

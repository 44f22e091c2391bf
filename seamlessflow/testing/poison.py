"""Poison records for consumer tests: what a topic may carry that no consumer can use.

`garbage`: bytes that are not Confluent-framed Avro; `unknown schema id`: a valid frame naming a schema id
no registry knows; `truncated`: a real record of the topic cut in half.
"""

from __future__ import annotations

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.messages import DeadLetter
from seamlessflow.topics import Topics

REASONS = {"garbage": "unknown magic byte", "unknown schema id": "987654", "truncated": "corrupt"}


def poison_values(codec: Codec, topic: str, sample: object) -> dict[str, bytes]:
    encoded = codec.encode(sample, topic)
    return {
        "garbage": b"\x07" + encoded[1:],  # a magic byte no framing uses
        "unknown schema id": b"\x00" + (987654).to_bytes(4, "big") + encoded[5:],
        "truncated": encoded[: len(encoded) // 2],
    }


def produce_poison(settings: Settings, codec: Codec, topic: str, sample: object,
                   key: str = "poison") -> dict[str, bytes]:
    """Writes the three poison records to `topic` (acknowledged) and returns them by kind."""
    values = poison_values(codec, topic, sample)
    produce_raw(settings, topic, *values.values(), key=key)
    return values


def produce_raw(settings: Settings, topic: str, *values: bytes, key: str = "poison") -> None:
    producer = MessageProducer(settings, Codec())  # the bytes as given: the codec is not used
    for value in values:
        producer.send_bytes(topic, key, value)
    producer.flush(30)


def letters(settings: Settings, codec: Codec, service: str) -> list[DeadLetter]:
    return [d for d in read_messages(settings, Topics(settings).dead_letter, codec)
            if isinstance(d, DeadLetter) and d.service == service]


def assert_dead_lettered(found: list[DeadLetter], values: dict[str, bytes], topic: str) -> None:
    """Each poison record has exactly one letter, with its bytes, its topic and a reason naming the fault."""
    for kind, value in values.items():
        matching = [d for d in found if d.value == value]
        assert len(matching) == 1, (kind, found)
        assert matching[0].source_topic == topic and REASONS[kind] in matching[0].reason, (kind, matching[0].reason)

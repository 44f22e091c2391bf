"""Reading a live topic "up to now".

`read_topic` stops at each partition's end as the broker reported it when the read began. These helpers
also stop at the first record produced after the call began (CreateTime), so a slow read of the status
topic (heartbeats every second from every resource) is still the snapshot a rebuild, `timeline` or
`status` wants.
"""

from __future__ import annotations

from collections.abc import Iterator

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.io import Record, read_topic
from seamlessflow.messages import now_ms


def records_until(settings: Settings, topic: str, codec: Codec, until_ms: int | None = None,
                  timeout_s: float = 30.0, poison: bool = False) -> Iterator[Record]:
    """Decodable records from the beginning up to `until_ms` (default: now); undecodable ones skipped,
    unless `poison` (then they come too, with `error` set, for a service to dead-letter)."""
    until_ms = now_ms() if until_ms is None else until_ms
    for record in read_topic(settings, topic, codec, timeout_s=timeout_s):
        if record.timestamp_ms > until_ms:
            return
        if record.message is not None or poison:
            yield record


def messages_until(settings: Settings, topic: str, codec: Codec, timeout_s: float = 30.0) -> list[object]:
    return [record.message for record in records_until(settings, topic, codec, timeout_s=timeout_s)]

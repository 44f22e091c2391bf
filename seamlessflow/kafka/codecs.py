"""The codec a process uses, from its settings: a Confluent Schema Registry's ids when one is configured,
else the local deterministic ones.

Why in the Kafka layer and not beside the codec: the registry client is confluent-kafka's, which only this
layer imports, and the codec (`seamlessflow.avro`) stays below Kafka, knowing only the `Registry` protocol.
The client is imported only when a registry is configured: importing it takes seconds.
"""

from __future__ import annotations

from seamlessflow.avro import Codec
from seamlessflow.config import Settings


def codec_for(settings: Settings) -> Codec:
    """The codec a process should use: Schema Registry if configured, else the local deterministic one."""
    registry = None
    if settings.schema_registry_url:
        from seamlessflow.kafka.schema_registry import ConfluentRegistry

        registry = ConfluentRegistry(settings.schema_registry_url, settings.schema_registry_conf)
    return Codec(registry, max_record_bytes=settings.max_record_bytes, packed=settings.packed_token_arrays)

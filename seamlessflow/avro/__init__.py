"""Avro schemas and the Confluent wire-format codec."""

from seamlessflow.avro.codec import Codec, CodecError, RecordTooLarge
from seamlessflow.avro.registry import LocalRegistry

__all__ = ["Codec", "CodecError", "LocalRegistry", "RecordTooLarge", "codec_for"]


def codec_for(settings) -> Codec:
    """The codec a process should use: Schema Registry if configured, else the local deterministic one."""
    registry = None
    if settings.schema_registry_url:
        from seamlessflow.kafka.schema_registry import ConfluentRegistry  # the Kafka layer sits above the codec

        registry = ConfluentRegistry(settings.schema_registry_url, settings.schema_registry_conf)
    return Codec(registry, max_record_bytes=settings.max_record_bytes, packed=settings.packed_token_arrays)

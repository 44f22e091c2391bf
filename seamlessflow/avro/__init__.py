"""Avro schemas and the Confluent wire-format codec (a process picks its codec with
`seamlessflow.kafka.codecs.codec_for`, where the Schema Registry client lives)."""

from seamlessflow.avro.codec import Codec, CodecError, RecordTooLarge
from seamlessflow.avro.registry import LocalRegistry

__all__ = ["Codec", "CodecError", "LocalRegistry", "RecordTooLarge"]

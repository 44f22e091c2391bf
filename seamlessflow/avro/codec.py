"""Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro binary (fastavro).

Records are decoded with the writer's schema (looked up by id) resolved against the reader's current
dataclass schema, so a BACKWARD-compatible change (new field with a default) reads old and new records.
Per-token arrays are written packed (`seamlessflow/avro/packing.py`); records in the older array form, and
records written with the schemas in `schemas/previous/`, decode to the same messages.
"""

from __future__ import annotations

import io
import struct
from typing import Any, cast

import fastavro
from fastavro.schema import to_parsing_canonical_form

from seamlessflow.avro.packing import from_wire, to_wire
from seamlessflow.avro.registry import LocalRegistry, Registry
from seamlessflow.avro.schema import avro_schema_of, load_schema_file, previous_schemas
from seamlessflow.messages import MESSAGE_TYPES, NAMESPACE, checked_enums

MAGIC = 0
HEADER = struct.Struct(">bI")
DEFAULT_MAX_RECORD_BYTES = 1_000_000  # below Kafka's default message.max.bytes (1 MiB + overhead)


class CodecError(ValueError):
    """A record that cannot be encoded or decoded; the message says why."""


class RecordTooLarge(CodecError):
    pass


class Codec:
    """Encodes message dataclasses to Confluent-framed Avro and back.

    `packed=False` writes per-token arrays as Avro arrays, as writers before packing did (tests, benchmarks).
    """

    def __init__(self, registry: Registry | None = None, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                 packed: bool = True):
        self._registry = registry or LocalRegistry(
            previous_schemas() + [load_schema_file(cls) for cls in MESSAGE_TYPES])
        self.max_record_bytes = max_record_bytes
        self.packed = packed
        self._classes = {f"{NAMESPACE}.{cls.__name__}": cls for cls in MESSAGE_TYPES}
        self._reader = {name: fastavro.parse_schema(avro_schema_of(cls)) for name, cls in self._classes.items()}
        self._writer_ids: dict[tuple[type, str], int] = {}
        self._parsed_by_id: dict[int, Any] = {}
        self._resolve_by_id: dict[int, Any] = {}  # reader schema to resolve against; None when identical

    def encode(self, message: Any, topic: str) -> bytes:
        cls = type(message)
        schema_id = self._schema_id(cls, topic)
        buf = io.BytesIO()
        buf.write(HEADER.pack(MAGIC, schema_id))
        try:
            checked_enums(message)  # a field set to a bad value after construction
            record = to_wire(message, self.packed)
            fastavro.schemaless_writer(buf, self._reader[f"{NAMESPACE}.{cls.__name__}"], record)
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            raise CodecError(f"cannot encode {cls.__name__}: {exc}") from exc
        data = buf.getvalue()
        if len(data) > self.max_record_bytes:
            raise RecordTooLarge(
                f"{cls.__name__} record is {len(data)} bytes, over the {self.max_record_bytes}-byte limit"
            )
        return data

    def decode(self, data: bytes | None) -> Any:
        if data is None or len(data) < HEADER.size:
            raise CodecError("record is empty or shorter than the 5-byte Confluent header")
        magic, schema_id = HEADER.unpack_from(data)
        if magic != MAGIC:
            raise CodecError(f"unknown magic byte {magic} (expected 0, Confluent wire format)")
        writer = self._writer_schema(schema_id)
        cls = self._classes.get(writer["name"])
        if cls is None:
            raise CodecError(f"schema id {schema_id} names {writer['name']}, which this process does not know")
        try:
            record = fastavro.schemaless_reader(io.BytesIO(data[HEADER.size:]), writer, self._resolve_by_id[schema_id])
            if not isinstance(record, dict):
                raise TypeError(f"not a record but {type(record).__name__}")
            return from_wire(cls, record)
        except Exception as exc:  # fastavro raises several types for corrupt data; unpacking ValueError
            raise CodecError(f"corrupt {cls.__name__} record: {str(exc) or type(exc).__name__}") from exc

    def _schema_id(self, cls: type, topic: str) -> int:
        key = (cls, topic)
        if key not in self._writer_ids:
            subject = f"{topic}-{NAMESPACE}.{cls.__name__}"  # TopicRecordNameStrategy: several types per topic
            self._writer_ids[key] = self._registry.id_for(avro_schema_of(cls), subject)
        return self._writer_ids[key]

    def _writer_schema(self, schema_id: int) -> Any:
        if schema_id not in self._parsed_by_id:
            try:
                raw = self._registry.schema_for(schema_id)
            except LookupError as exc:
                raise CodecError(str(exc)) from exc
            parsed = cast(dict[str, Any], fastavro.parse_schema(raw))  # a record schema: the registry holds only ours
            reader = self._reader.get(parsed["name"])
            same = reader is not None and to_parsing_canonical_form(parsed) == to_parsing_canonical_form(reader)
            self._parsed_by_id[schema_id], self._resolve_by_id[schema_id] = parsed, (None if same else reader)
        return self._parsed_by_id[schema_id]

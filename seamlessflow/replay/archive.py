"""Topic records kept as Avro object container files (fastavro), one file per topic: `DIR/<topic>.avro`.

Each entry keeps the record's place (topic, partition, offset, timestamp, key) and the message itself as
a union of the message schemas, so any Avro tool can read an archive without SeamlessFlow. A record that
did not decode is kept as its raw bytes. Token arrays are kept packed, as on the wire; archives written
before packing (arrays) read the same. Reading gives back `Record`s whose messages are equal to the
originals and whose values are re-encoded with the current codec (byte-identical with the same registry).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import cast

import fastavro

from seamlessflow.avro import Codec
from seamlessflow.avro.packing import from_wire, to_wire
from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.kafka.io import Record
from seamlessflow.messages import MESSAGE_TYPES, NAMESPACE

SUFFIX = ".avro"


def archive_schema() -> dict:
    return {
        "type": "record", "name": "ArchivedRecord", "namespace": f"{NAMESPACE}.archive",
        "fields": [
            {"name": "topic", "type": "string"},
            {"name": "partition", "type": "int"},
            {"name": "offset", "type": "long"},
            {"name": "timestamp_ms", "type": "long"},
            {"name": "key", "type": ["null", "bytes"]},
            {"name": "message", "type": ["null", *[avro_schema_of(cls) for cls in MESSAGE_TYPES]]},
            {"name": "raw", "type": ["null", "bytes"]},  # the value, only when it could not be decoded
        ],
    }


_PARSED = fastavro.parse_schema(archive_schema())
_CLASSES = {f"{NAMESPACE}.{cls.__name__}": cls for cls in MESSAGE_TYPES}


def _entry(record: Record) -> dict:
    message = None
    if record.message is not None:
        message = (f"{NAMESPACE}.{type(record.message).__name__}", to_wire(record.message))
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp_ms": record.timestamp_ms, "key": record.key, "message": message,
            "raw": None if message else (record.value or b"")}


def write_archive(directory: Path, topic: str, records: Iterable[Record]) -> Path:
    """Writes (replacing) `DIR/<topic>.avro`; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{topic}{SUFFIX}"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        fastavro.writer(out, _PARSED, (_entry(r) for r in records), codec="deflate",
                        metadata={"seamlessflow.topic": topic})
    os.replace(tmp, path)
    return path


def archive_file(directory: Path, topic: str, short_name: str | None = None) -> Path:
    """The file for a full topic name, or else the only one whose name ends with `.<short_name>`."""
    exact = directory / f"{topic}{SUFFIX}"
    if exact.exists():
        return exact
    if short_name:
        matches = sorted(directory.glob(f"*.{short_name}{SUFFIX}"))
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise FileNotFoundError(f"several archives in {directory} end with .{short_name}: {matches}")
    raise FileNotFoundError(f"no archive for {topic} in {directory}")


def read_archive(path: Path, codec: Codec) -> Iterator[Record]:
    with open(path, "rb") as source:
        for entry in fastavro.reader(source, return_record_name=True):
            yield _record(cast(dict, entry), codec)  # the archive's schema is a record (see write_archive)


def _record(entry: dict, codec: Codec) -> Record:
    record = Record(entry["topic"], entry["partition"], entry["offset"], entry["key"], entry["raw"],
                    entry["timestamp_ms"])
    if entry["message"] is not None:
        name, fields = entry["message"]
        record.message = from_wire(_CLASSES[name], fields)  # archives of either form
        record.value = codec.encode(record.message, record.topic)
    else:
        record.error = "kept as raw bytes: it did not decode when archived"
    return record

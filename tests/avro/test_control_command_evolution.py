"""ControlCommand gained `generation` (default null): commands written before it read as having none, and a
reader that predates the field reads new commands without it (schemas/previous/control_command.v1.avsc)."""

import dataclasses
import io
import json
import struct

import fastavro

from seamlessflow.avro import Codec, LocalRegistry
from seamlessflow.avro.schema import schemas_dir
from seamlessflow.messages import ControlCommand

V1 = json.loads((schemas_dir() / "previous" / "control_command.v1.avsc").read_text())
COMMAND = ControlCommand("c1", "rollout-1", 7, "set_active", "team", "run", 1, role="train", generation="g2")


def test_v1_record_reads_without_a_generation():
    registry = LocalRegistry([V1])
    old = {k: v for k, v in dataclasses.asdict(COMMAND).items() if k != "generation"}
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(V1), old)
    record = struct.pack(">bI", 0, registry.add(V1)) + body.getvalue()
    assert Codec(registry).decode(record) == dataclasses.replace(COMMAND, generation=None)


def test_v1_reader_reads_a_new_record_without_the_field():
    registry = LocalRegistry([V1])
    record = Codec(registry).encode(COMMAND, "t")
    writer = fastavro.parse_schema(registry.schema_for(struct.unpack(">I", record[1:5])[0]))
    as_v1 = fastavro.schemaless_reader(io.BytesIO(record[5:]), writer, fastavro.parse_schema(V1))
    assert as_v1 == {k: v for k, v in dataclasses.asdict(COMMAND).items() if k != "generation"}

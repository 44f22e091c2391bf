"""One realistic instance of every message type, shared by codec and broker tests."""

import dataclasses
import io
import json
import struct
from typing import Any

import fastavro

from seamlessflow.avro import LocalRegistry
from seamlessflow.avro.packing import to_wire
from seamlessflow.avro.schema import avro_schema_of, schema_file_name, schemas_dir
from seamlessflow.core.control import CommandKind, Outcome
from seamlessflow.core.episodes import EpisodeStatus, TrajectoryStatus
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.messages import (
    CommandAck,
    ControlCommand,
    DeadLetter,
    EpisodeEnd,
    ResourceStatus,
    Task,
    TokenIO,
    Trajectory,
    WeightVersion,
)

T = 1_795_000_000_000

SAMPLES = [
    TokenIO("c1.0", "s1", "teamA", "run1", "c1", "engine-0", 0, [1, 2, 3], [4, 5], [-0.5, -1.25], [3, 4], "stop",
            0.5, 12.0, 40.0, T),
    EpisodeEnd("s1/end", "s1", "teamA", "run1", 0.75, EpisodeStatus.DONE, '{"steps": 2}', 1, T, group_id="g1",
               task_id="t1"),
    Trajectory("s1/0", "s1", 0, "g1", "t1", "teamA", "run1", [1, 2, 3, 4, 5], [0, 0, 0, 1, 1],
               [0.0, 0.0, 0.0, -0.5, -1.25], [-1, -1, -1, 3, 4], 0.75, TrajectoryStatus.DONE, 1, 0, T),
    Task("task-1", "t1", "g1", "teamA", "run1", "arith", "What is 2+3?", '{"answer": 5}', 4, 0, T),
    ControlCommand("cmd-1", "gpu-0", 7, CommandKind.LOAD_WEIGHTS, "teamA", "run1", T, weight_version=3, weight_uri="file:///w/3"),
    ResourceStatus("hb-1", "gpu-0", ResourceKind.ROLLOUT, ["rollout", "train"], "rollout", ResourceState.ACTIVE, 3,
                   {"tokens_per_s": 190.5}, "teamA", "run1", T, engine_url="http://127.0.0.1:8001", epoch=7,
                   hardware_tags=["compute", "h100"]),
    CommandAck("ack-1", "gpu-0", "cmd-1", CommandKind.LOAD_WEIGHTS, 7, Outcome.OK, "", 120.5, "teamA", "run1", T),
    WeightVersion("w-3", 3, "file:///w/3", 30, "hf-safetensors", "trainer-0", "teamA", "run1", T),
    DeadLetter("dl-1", "x.session-events", 2, 41, b"s1", b"\x01garbage", "unknown magic byte 1", "assembler",
               "teamA", "run1", T),
]


def previous_schema(message_type: type, version: int) -> dict | None:
    """`schemas/previous/<name>.v<version>.avsc`, None when that type has no such version."""
    path = schemas_dir() / "previous" / f"{schema_file_name(message_type).removesuffix('.avsc')}.v{version}.avsc"
    return json.loads(path.read_text()) if path.exists() else None


def encode_with_schema(schema: dict, record: dict) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), record)
    return struct.pack(">bI", 0, LocalRegistry().add(schema)) + body.getvalue()


def check_added_field(codec: Any, sample: Any, version: int, field: str, value: Any, default: Any = None) -> None:
    """A field added after `schemas/previous/<name>.v<version>.avsc` is a compatible evolution both ways: a record
    the previous schema wrote decodes with the field's default, and a record with the field set round-trips and
    still reads with the previous schema (without the field)."""
    before = previous_schema(type(sample), version)
    assert before is not None and field not in {f["name"] for f in before["fields"]}
    back = codec.decode(encode_with_schema(before, to_wire(sample)))
    assert back == sample and getattr(back, field) == default
    changed = dataclasses.replace(sample, **{field: value})
    data = codec.encode(changed, "t")
    assert codec.decode(data) == changed
    old: Any = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(avro_schema_of(type(sample))),
                                          fastavro.parse_schema(before))  # a record: a dict
    assert old["event_id"] == sample.event_id and field not in old


def encode_before_packing(message: Any) -> bytes:  # a message dataclass
    """A record exactly as the code before packing wrote it: the v1 schema's id, every array as an Avro array
    (messages without token arrays had the schema they have now)."""
    schema = previous_schema(type(message), 1) or avro_schema_of(type(message))
    return encode_with_schema(schema, dataclasses.asdict(message))


def encode_before_prompt_deltas(message: TokenIO) -> bytes:
    """A TokenIO exactly as the code before prompt deltas wrote it: the v2 schema's id, arrays packed."""
    schema = previous_schema(TokenIO, 2)
    assert schema is not None
    return encode_with_schema(schema, to_wire(message))

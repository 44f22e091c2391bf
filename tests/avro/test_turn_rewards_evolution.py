"""EpisodeEnd gained `call_rewards` and Trajectory `turn_ends` / `turn_rewards` (defaults empty): records written
before them read as having none, and readers that predate them read new records without them
(schemas/previous/episode_end.v1.avsc, schemas/previous/trajectory.v2.avsc)."""

import dataclasses
import io
import json
import struct

import fastavro
import pytest

from seamlessflow.avro import Codec, LocalRegistry
from seamlessflow.avro.schema import schemas_dir
from seamlessflow.messages import EpisodeEnd, Trajectory

END = EpisodeEnd("s1.end", "s1", "team", "run", 1.0, "done", "{}", 3, 1, "g", "t", call_rewards={"#0": 0.5, "ab": -1.0})
TRAJECTORY = Trajectory("s1/0", "s1", 0, "g", "t", "team", "run", [1, 2, 3, 4], [0, 1, 0, 1], [0.0, -0.5, 0.0, -0.25],
                        [-1, 3, -1, 3], 1.0, "done", 2, 0, 1, "{}", turn_ends=[2, 4], turn_rewards=[0.5, 0.0])
CASES = [(END, "episode_end.v1.avsc", {"call_rewards"}),
         (TRAJECTORY, "trajectory.v2.avsc", {"turn_ends", "turn_rewards"})]


def _old(name: str) -> dict:
    return json.loads((schemas_dir() / "previous" / name).read_text())


@pytest.mark.parametrize(("message", "old_file", "new_fields"), CASES, ids=["episode_end", "trajectory"])
def test_an_old_record_reads_with_the_new_fields_empty(message, old_file, new_fields):
    old_schema = _old(old_file)
    registry = LocalRegistry([old_schema])
    body = io.BytesIO()
    old = {k: v for k, v in dataclasses.asdict(message).items() if k not in new_fields}
    fastavro.schemaless_writer(body, fastavro.parse_schema(old_schema), old)
    record = struct.pack(">bI", 0, registry.add(old_schema)) + body.getvalue()
    empty = {name: type(getattr(message, name))() for name in new_fields}
    assert Codec(registry).decode(record) == dataclasses.replace(message, **empty)


@pytest.mark.parametrize(("message", "old_file", "new_fields"), CASES, ids=["episode_end", "trajectory"])
def test_an_old_reader_reads_a_new_record_without_them(message, old_file, new_fields):
    old_schema = _old(old_file)
    registry = LocalRegistry([old_schema])
    record = Codec(registry).encode(message, "t")
    writer = fastavro.parse_schema(registry.schema_for(struct.unpack(">I", record[1:5])[0]))
    as_old = fastavro.schemaless_reader(io.BytesIO(record[5:]), writer, fastavro.parse_schema(old_schema))
    assert set(as_old) & new_fields == set()
    assert as_old["session_id"] == "s1" and as_old["reward"] == 1.0


def test_the_new_fields_round_trip():
    codec = Codec(LocalRegistry([]))
    assert codec.decode(codec.encode(END, "t")) == END
    assert codec.decode(codec.encode(TRAJECTORY, "t")) == TRAJECTORY

"""ResourceStatus's `note` (a line for people, e.g. the autoscaler's reason): a compatible evolution, read both ways
(schemas/previous/resource_status.v1.avsc)."""

import dataclasses
import io

import fastavro

from seamlessflow.avro.packing import to_wire
from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.messages import ResourceStatus
from seamlessflow.testing.samples import SAMPLES, encode_with_schema, previous_schema

STATUS = next(s for s in SAMPLES if isinstance(s, ResourceStatus))


def test_heartbeats_written_before_notes_decode_without_one(codec):
    before = previous_schema(ResourceStatus, 1)
    assert before is not None and "note" not in {f["name"] for f in before["fields"]}
    back = codec.decode(encode_with_schema(before, to_wire(STATUS)))
    assert back == STATUS and back.note is None


def test_a_heartbeat_with_a_note_round_trips_and_a_reader_of_the_previous_schema_still_reads_it(codec):
    noted = dataclasses.replace(STATUS, note="autoscale advice: 2 -> 3 engines (backlog)")
    data = codec.encode(noted, "t")
    assert codec.decode(data) == noted
    old = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(avro_schema_of(ResourceStatus)),
                                     fastavro.parse_schema(previous_schema(ResourceStatus, 1)))
    assert old["resource_id"] == STATUS.resource_id and "note" not in old

"""TokenIO's `adapter` (the team's LoRA adapter that served the call): a compatible evolution, read both ways."""

import dataclasses
import io

import fastavro

from seamlessflow.avro.packing import to_wire
from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.messages import TokenIO
from seamlessflow.testing.samples import SAMPLES, encode_with_schema, previous_schema

TOKEN_IO = SAMPLES[0]


def test_records_written_before_adapters_decode_as_served_by_the_base(codec):
    before = previous_schema(TokenIO, 4)
    assert before is not None and "adapter" not in {f["name"] for f in before["fields"]}
    back = codec.decode(encode_with_schema(before, to_wire(TOKEN_IO)))
    assert back == TOKEN_IO and back.adapter is None


def test_an_adapters_record_round_trips_and_a_reader_of_the_previous_schema_still_reads_it(codec):
    served = dataclasses.replace(TOKEN_IO, adapter="red-lora")
    data = codec.encode(served, "t")
    assert codec.decode(data) == served
    old = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(avro_schema_of(TokenIO)),
                                     fastavro.parse_schema(previous_schema(TokenIO, 4)))
    assert old["event_id"] == served.event_id and "adapter" not in old

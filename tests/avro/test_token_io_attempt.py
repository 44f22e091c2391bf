"""TokenIO's `attempt` (a client's retry of one request): a compatible evolution, read both ways."""

import dataclasses
import io

import fastavro

from seamlessflow.avro.packing import to_wire
from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.messages import TokenIO
from seamlessflow.testing.samples import SAMPLES, encode_with_schema, previous_schema

TOKEN_IO = SAMPLES[0]


def test_records_written_before_attempts_decode_as_first_attempts(codec):
    before = previous_schema(TokenIO, 3)
    assert before is not None and "attempt" not in {f["name"] for f in before["fields"]}
    back = codec.decode(encode_with_schema(before, to_wire(TOKEN_IO)))
    assert back == TOKEN_IO and back.attempt == 0


def test_a_retry_round_trips_and_a_reader_of_the_previous_schema_still_reads_it(codec):
    retry = dataclasses.replace(TOKEN_IO, attempt=2)
    data = codec.encode(retry, "t")
    assert codec.decode(data) == retry
    old = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(avro_schema_of(TokenIO)),
                                     fastavro.parse_schema(previous_schema(TokenIO, 3)))
    assert old["event_id"] == retry.event_id and "attempt" not in old

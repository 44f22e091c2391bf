"""TokenIO's prompt-delta fields: a compatible evolution, read both ways."""

import dataclasses
import io

import fastavro

from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.messages import TokenIO
from seamlessflow.testing.samples import SAMPLES, encode_before_prompt_deltas, previous_schema

TOKEN_IO = SAMPLES[0]
DELTA = dataclasses.replace(TOKEN_IO, event_id="c2.0", prompt_ids=[9], prompt_base_id="c1.0", prompt_base_tokens=5)


def test_records_written_before_prompt_deltas_decode_as_whole_prompts(codec):
    back = codec.decode(encode_before_prompt_deltas(TOKEN_IO))
    assert back == TOKEN_IO and back.prompt_base_id is None and back.prompt_base_tokens == 0


def test_a_delta_round_trips(codec):
    assert codec.decode(codec.encode(DELTA, "t")) == DELTA


def test_a_reader_of_the_previous_schema_reads_a_delta_but_sees_only_its_tail(codec):
    """Why consumers are upgraded before proxies record deltas (`proxy.prompt_deltas: false` until then)."""
    data = codec.encode(DELTA, "t")
    old = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(avro_schema_of(TokenIO)),
                                     fastavro.parse_schema(previous_schema(TokenIO, 2)))
    assert (
        old["event_id"] == "c2.0"
        and "prompt_base_id" not in old
        and old["prompt_ids_packed"] == (9).to_bytes(4, "little")
    )

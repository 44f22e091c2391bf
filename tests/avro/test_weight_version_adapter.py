"""WeightVersion's `adapter` (a version of a team's LoRA adapter, not of the base): a compatible evolution, read
both ways (schemas/previous/weight_version.v1.avsc)."""

import dataclasses
import io

import fastavro

from seamlessflow.avro.packing import to_wire
from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.messages import WeightVersion
from seamlessflow.testing.samples import SAMPLES, encode_with_schema, previous_schema

VERSION = next(s for s in SAMPLES if isinstance(s, WeightVersion))


def test_versions_announced_before_adapters_decode_as_versions_of_the_base(codec):
    before = previous_schema(WeightVersion, 1)
    assert before is not None and "adapter" not in {f["name"] for f in before["fields"]}
    back = codec.decode(encode_with_schema(before, to_wire(VERSION)))
    assert back == VERSION and back.adapter is None


def test_an_adapter_version_round_trips_and_a_reader_of_the_previous_schema_still_reads_it(codec):
    of_adapter = dataclasses.replace(VERSION, adapter="red-lora")
    data = codec.encode(of_adapter, "t")
    assert codec.decode(data) == of_adapter
    old = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(avro_schema_of(WeightVersion)),
                                     fastavro.parse_schema(previous_schema(WeightVersion, 1)))
    assert old["version"] == VERSION.version and "adapter" not in old
